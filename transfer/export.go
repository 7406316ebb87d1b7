package transfer

import (
	"context"
	"io"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/postgres"
)

// pageSize is how many counters an export lists and reads at once: one
// ReadCounters call, so one snapshot of their values where the store has
// one.
const pageSize = shardcounter.MaxListLimit

// Stats count what an export or import moved.
type Stats struct {
	Counters int64 // counter lines
	Members  int64 // members
	Buckets  int64 // window buckets
	// Conflicts are counters an import found with other options and left
	// alone (without --replace).
	Conflicts int64
	// Replaced are counters an import deleted and made again with the
	// export's options (--replace).
	Replaced int64
}

// ExportOptions configure Export.
type ExportOptions struct {
	// Prefix exports only the counters whose ids start with it.
	Prefix string
	// Now is the clock that places the window of retention; default
	// time.Now.
	Now func() time.Time
	// Progress, when set, is told of each counter exported.
	Progress *Progress
}

// Export writes every counter of store whose id starts with opts.Prefix
// to w in the export format, in id order: a page of counters and their
// values at a time, read in one snapshot where the store has one (bolt,
// Pebble, PostgreSQL, Redis standalone); members and buckets are read
// after their page's values. An export taken while writes go on is
// therefore consistent per counter page, not as a whole: stop writes for
// an exact copy (docs/EXPORT.md, "Consistency").
func Export(ctx context.Context, store shardcounter.CounterStore, w io.Writer, opts ExportOptions) (Stats, error) {
	var st Stats
	if opts.Now == nil {
		opts.Now = time.Now
	}
	src, release, err := readView(ctx, store)
	if err != nil {
		return st, err
	}
	defer release()
	enc, err := NewEncoder(w, opts.Prefix)
	if err != nil {
		return st, err
	}
	after := ""
	for {
		page, err := src.ListCounters(ctx, opts.Prefix, after, pageSize)
		if err != nil {
			return st, err
		}
		if len(page) == 0 {
			break
		}
		if err := exportPage(ctx, src, enc, page, opts, &st); err != nil {
			return st, err
		}
		after = page[len(page)-1].ID
		if len(page) < pageSize {
			break
		}
	}
	return st, enc.Close()
}

func exportPage(ctx context.Context, store source, enc *Encoder, page []*shardcounter.Counter, opts ExportOptions, st *Stats) error {
	ids := make([]string, len(page))
	for i, c := range page {
		ids[i] = c.ID
	}
	readings, err := store.ReadCounters(ctx, ids)
	if err != nil {
		return err
	}
	for i, c := range page {
		if readings[i] == nil {
			continue // deleted since the listing
		}
		rec := &Counter{ID: c.ID, Kind: kindOf(c.Kind), Shards: readings[i].Shards, Min: c.Min, Max: c.Max, Window: c.Window, Value: readings[i].Value}
		if c.Window != nil {
			from, to := retention(c.Window, opts.Now())
			if rec.Buckets, err = store.ReadSeries(ctx, c.ID, from, to); err != nil {
				return err
			}
			st.Buckets += int64(len(rec.Buckets))
		}
		if err := enc.Counter(rec); err != nil {
			return err
		}
		st.Counters++
		if rec.Kind == shardcounter.KindDistinct {
			if err := exportMembers(ctx, store, enc, c.ID, st); err != nil {
				return err
			}
		}
		opts.Progress.Add(1)
	}
	return nil
}

func exportMembers(ctx context.Context, store source, enc *Encoder, id string, st *Stats) error {
	after := ""
	for {
		ms, err := store.ListMembers(ctx, id, after, MembersPerLine)
		if err != nil {
			if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
				return nil // deleted while it was read
			}
			return err
		}
		if err := enc.Members(id, ms); err != nil {
			return err
		}
		st.Members += int64(len(ms))
		if len(ms) < MembersPerLine {
			return nil
		}
		after = ms[len(ms)-1]
	}
}

// source is what an export reads: a CounterStore, or a snapshot of one.
type source interface {
	ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error)
	ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error)
	ListMembers(ctx context.Context, id, after string, limit int) ([]string, error)
	ReadSeries(ctx context.Context, id string, from, to time.Time) ([]shardcounter.Bucket, error)
}

// readView returns what an export of store reads: on PostgreSQL a
// Snapshot (one REPEATABLE READ transaction), elsewhere the store.
func readView(ctx context.Context, store shardcounter.CounterStore) (source, func(), error) {
	if p, ok := store.(*postgres.CounterStore); ok {
		snap, err := p.Snapshot(ctx)
		if err != nil {
			return nil, nil, err
		}
		return snap, func() { snap.Close() }, nil
	}
	return store, func() {}, nil
}

// retention returns the interval of bucket starts a window keeps at now:
// from the oldest bucket it retains to the end of the current one.
func retention(w *shardcounter.Window, now time.Time) (from, to time.Time) {
	cur := w.BucketOf(now)
	return cur.Add(time.Duration(w.Bucket) - time.Duration(w.Retention)), cur.Add(time.Duration(w.Bucket))
}

func kindOf(k shardcounter.Kind) shardcounter.Kind {
	if k == "" {
		return shardcounter.KindSum
	}
	return k
}
