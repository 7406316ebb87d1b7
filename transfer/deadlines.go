package transfer

import (
	"context"
	"fmt"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/expiry"
)

// withExpiry returns store with deadlines: the expiry wrapper in store's
// chain when it has one (shardcounter.As), else expiry.Wrap of it. An import writes through it so that a
// deadline is kept as the engine keeps it (records of the store's own,
// with their index), and a write to a name expired in the target starts
// a new counter there as it would through the engine.
func withExpiry(store shardcounter.CounterStore) *expiry.Store {
	if es, ok := shardcounter.As[*expiry.Store](store); ok {
		return es
	}
	return expiry.Wrap(store, expiry.Options{})
}

// deadlines gives the names of the counters just written the deadlines
// the export says: ExpireCounter for one it gives (a deadline already
// past deletes the name at once, as the export's reader would have found
// it absent), PersistCounter for a name that has one and the export
// none. A name whose deadline is already right is left alone, so a
// second import changes nothing. A hash's name is set once for all its
// fields.
func (im *importer) deadlines(ctx context.Context, entries []*entry) error {
	var names []string
	want := make(map[string]int64)
	for _, e := range entries {
		name := shardcounter.NameOf(e.rec.ID)
		if _, ok := want[name]; e.skip || ok {
			continue
		}
		names = append(names, name)
		want[name] = 0
		if e.rec.ExpiresAt != nil {
			want[name] = e.rec.ExpiresAt.UnixMilli()
		}
	}
	// The records are read past the wrapper's cache, a batch at a time:
	// one ReadCounters per MaxReadBatch names, not a read per name.
	for len(names) > 0 {
		n := min(len(names), shardcounter.MaxReadBatch)
		have, err := readDeadlines(ctx, im.store.Unwrap(), names[:n])
		if err != nil {
			return err
		}
		for i, name := range names[:n] {
			switch w := want[name]; {
			case w == have[i]:
			case w == 0:
				_, err = im.store.PersistCounter(ctx, name)
			default:
				_, err = im.store.ExpireCounter(ctx, name, time.UnixMilli(w))
				im.st.Deadlines++
			}
			if err != nil {
				return fmt.Errorf("%q: deadline: %w", name, err)
			}
		}
		names = names[n:]
	}
	return nil
}

// ranking makes the store hold the export's ranking: it creates a
// missing one, leaves one with the same options as it is, and reports one
// with other options (RankingConflict) unless Replace, which deletes it
// and creates it anew.
func (im *importer) ranking(ctx context.Context, rec *Ranking) error {
	im.st.Rankings++
	rs := im.store
	want := rec.RankingOptions.WithDefaults()
	have, err := rs.GetRanking(ctx, rec.Name)
	switch {
	case shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND:
	case err != nil:
		return err
	case have.SameOptions(want):
		return nil
	case !im.opts.Replace:
		im.st.Conflicts++
		if im.opts.RankingConflict != nil {
			im.opts.RankingConflict(rec.Name, have.RankingOptions, want)
		}
		return nil
	default:
		if err := rs.DeleteRanking(ctx, rec.Name); err != nil && shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
			return fmt.Errorf("replace ranking %q: %w", rec.Name, err)
		}
		im.st.Replaced++
	}
	r := &shardcounter.Ranking{Name: rec.Name, RankingOptions: want, CreatedAt: time.Now().UTC()}
	stored, _, err := rs.CreateRanking(ctx, r)
	if err != nil {
		return fmt.Errorf("create ranking %q: %w", rec.Name, err)
	}
	if !stored.SameOptions(want) { // created meanwhile by another with other options
		im.st.Conflicts++
		if im.opts.RankingConflict != nil {
			im.opts.RankingConflict(rec.Name, stored.RankingOptions, want)
		}
	}
	return nil
}
