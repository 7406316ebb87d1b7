package transfer

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/expiry"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/sketch"
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
	// Collections and Documents of collections.
	Collections int64
	Documents   int64
	// Rankings are ranking definitions; Deadlines the counter lines with
	// an expires_at.
	Rankings  int64
	Deadlines int64
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
	// Deadlines are read from their records in the same view as the
	// counters (expiry's package doc), so the raw store serves as well
	// as a wrapped one and a PostgreSQL snapshot holds them too.
	if es, ok := shardcounter.As[*expiry.Store](store); ok {
		store = es.Unwrap()
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
	if shardcounter.IsInternalID(opts.Prefix) {
		return st, shardcounter.Errorf(shardcounter.EINVALID, "prefix %q starts with U+001E, reserved for internal records, which are never exported: give a prefix of names", opts.Prefix)
	}
	// Internal records (deadlines, their index) sort before every name
	// and are not counters of the user's: the listing starts past them.
	after := skipInternal
	for {
		page, err := src.ListCounters(ctx, opts.Prefix, after, pageSize)
		if err != nil {
			return st, err
		}
		if len(page) == 0 {
			break
		}
		if err := exportPage(ctx, pageSource{src}, enc, page, opts, &st); err != nil {
			return st, err
		}
		after = page[len(page)-1].ID
		if len(page) < pageSize {
			break
		}
	}
	if err := exportRankings(ctx, store, enc, opts, &st); err != nil {
		return st, err
	}
	if err := exportCollections(ctx, store, enc, opts, &st); err != nil {
		return st, err
	}
	return st, enc.Close()
}

func exportPage(ctx context.Context, store pageSource, enc *Encoder, page []*shardcounter.Counter, opts ExportOptions, st *Stats) error {
	// The listing starts past internal records; a store that lists one
	// anyway does not get it exported.
	page = slices.DeleteFunc(slices.Clone(page), func(c *shardcounter.Counter) bool { return shardcounter.IsInternalID(c.ID) })
	ids := make([]string, len(page))
	for i, c := range page {
		ids[i] = c.ID
	}
	readings, err := store.ReadCounters(ctx, ids)
	if err != nil {
		return err
	}
	deadlines, err := readDeadlines(ctx, store, ids)
	if err != nil {
		return err
	}
	nowMS := opts.Now().UnixMilli()
	recs := make([]*Counter, 0, len(page))
	for i, c := range page {
		if readings[i] == nil || deadlines[i] != 0 && deadlines[i] <= nowMS {
			continue // deleted since the listing, or expired
		}
		rec := &Counter{ID: c.ID, Kind: kindOf(c.Kind), Shards: readings[i].Shards, Min: c.Min, Max: c.Max, Window: c.Window, Value: readings[i].Value}
		if rec.Kind == shardcounter.KindApprox {
			ok, err := store.approx(ctx, rec)
			if err != nil {
				return err
			}
			if !ok {
				continue // deleted since its value was read
			}
		}
		if deadlines[i] != 0 {
			at := time.UnixMilli(deadlines[i]).UTC()
			rec.ExpiresAt = &at
			st.Deadlines++
		}
		if c.Window != nil {
			from, to := retention(c.Window, opts.Now())
			if rec.Buckets, err = store.ReadSeries(ctx, c.ID, from, to); err != nil {
				return err
			}
			st.Buckets += int64(len(rec.Buckets))
		}
		recs = append(recs, rec)
	}
	p := &pageWriter{enc: enc, recs: recs, opts: opts, st: st}
	if ms, ok := store.source.(memberStream); ok {
		return p.withMembers(ctx, ms)
	}
	for len(p.recs) > 0 {
		rec, err := p.next()
		if err != nil {
			return err
		}
		if rec.Kind == shardcounter.KindDistinct {
			if err := exportMembers(ctx, store, enc, rec.ID, st); err != nil {
				return err
			}
		}
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

// skipInternal is a listing position past every internal record: they
// sort first, and no name starts with U+001E.
const skipInternal = shardcounter.InternalPrefix + "\U0010FFFF"

// readDeadlines returns the deadline, in Unix ms, of each id's name (0
// for none), read from the names' records (expiry.ReadDeadlines).
func readDeadlines(ctx context.Context, store source, ids []string) ([]int64, error) {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = shardcounter.NameOf(id)
	}
	return expiry.ReadDeadlines(ctx, store, names)
}

// exportRankings writes every ranking whose name starts with the prefix,
// by name.
func exportRankings(ctx context.Context, store shardcounter.CounterStore, enc *Encoder, opts ExportOptions, st *Stats) error {
	list, err := store.ListRankings(ctx)
	if err != nil {
		return err
	}
	for _, r := range list {
		if !strings.HasPrefix(r.Name, opts.Prefix) {
			continue
		}
		if err := enc.Ranking(&Ranking{Name: r.Name, RankingOptions: r.RankingOptions.WithDefaults()}); err != nil {
			return err
		}
		st.Rankings++
	}
	return nil
}

// pageSource is what an export reads a page of counters from.
type pageSource struct {
	source
}

// approx puts an approx counter's sketches on its line, with the shard
// count and value they make (one ReadSketches: one snapshot on every
// store, so the line is consistent in itself even if a write came after
// the page's values). It returns false for a counter deleted meanwhile.
func (p pageSource) approx(ctx context.Context, rec *Counter) (bool, error) {
	_, sks, err := p.ReadSketches(ctx, rec.ID)
	if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	v, err := sketch.Count(sks)
	if err != nil {
		return false, fmt.Errorf("counter %q: %w", rec.ID, err)
	}
	rec.Shards, rec.Value, rec.Sketches = len(sks), v, make([][]byte, len(sks))
	for i, b := range sks {
		rec.Sketches[i] = append([]byte{}, b...) // "" for a shard with none, not null
	}
	return true, nil
}

// source is what an export reads: a CounterStore, or a snapshot of one.
type source interface {
	ListCounters(ctx context.Context, prefix, after string, limit int) ([]*shardcounter.Counter, error)
	ReadCounters(ctx context.Context, ids []string) ([]*shardcounter.Reading, error)
	ListMembers(ctx context.Context, id, after string, limit int) ([]string, error)
	ReadSeries(ctx context.Context, id string, from, to time.Time) ([]shardcounter.Bucket, error)
	shardcounter.SketchStore
}

// readView returns what an export of store reads: on PostgreSQL a
// Snapshot (one REPEATABLE READ transaction), elsewhere the store.
func readView(ctx context.Context, store shardcounter.CounterStore) (source, func(), error) {
	if p, ok := shardcounter.As[*postgres.CounterStore](store); ok {
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
