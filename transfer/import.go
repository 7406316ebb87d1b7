package transfer

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/expiry"
	"github.com/shardcounter/shardcounter/pebble"
)

// Batch sizes of an import.
const (
	// importCounters is how many counters an import resolves and writes
	// at once: a ReadCounters call per MaxReadBatch of them.
	importCounters = 4 * shardcounter.MaxReadBatch
	// applyBatch is how many increments one Apply call carries.
	applyBatch = 4000
	// sketchBatch bounds the bytes of approx counters' sketches an
	// import holds pending and one Apply call carries (a sketch is up to
	// 16 KiB a shard): memory stays bounded, and a commit stays far
	// under the document stores' 10 MiB a request.
	sketchBatch = 4 << 20
	// embeddedScale multiplies both on Pebble and bolt, whose Apply is
	// one commit with one fsync whatever its size, and which hold no
	// server's queue up with a large batch: the fsyncs were a quarter
	// of an import into Pebble at 4000 increments a call.
	embeddedScale = 4
)

// batchScale returns how many times importCounters and applyBatch an
// import into store takes at once.
func batchScale(store shardcounter.CounterStore) int {
	_, p := shardcounter.As[*pebble.CounterStore](store)
	_, b := shardcounter.As[*bolt.CounterStore](store)
	if p || b {
		return embeddedScale
	}
	return 1
}

// ImportOptions configure Import.
type ImportOptions struct {
	// Replace deletes a counter that exists with other options and makes
	// it again with the export's; without it such a counter is reported
	// (Conflict) and left as it is.
	Replace bool
	// Clock is the clock the store was opened on (OpenStore). Without
	// one, a windowed counter's buckets cannot be placed at their times,
	// and importing one is an error that says so.
	Clock *Clock
	// Conflict, when set, is told of each counter left alone.
	Conflict func(id string, have, want shardcounter.Spec)
	// CollectionConflict, when set, is told of each collection left
	// alone: it exists with other options.
	CollectionConflict func(name string)
	// RankingConflict, when set, is told of each ranking left alone: it
	// exists with other options.
	RankingConflict func(name string, have, want shardcounter.RankingOptions)
	// Progress, when set, is told of each counter imported.
	Progress *Progress
}

// Import reads an export from r into store and makes each counter in it
// hold what the export says: it creates a missing counter, adds to an
// existing one with the same options the difference between the
// export's value and its own (bucket by bucket for a window), adds a
// distinct counter's members, and merges an approx counter's sketches
// into its shards. Importing the same export twice therefore
// leaves the same state as once, and an import cut short is resumed by
// running it again. Members that the store holds and the export does not
// are kept.
//
// Writes go through the store's Apply, the batch path the engine uses, a
// batch of up to 4000 increments at a time (16,000 on Pebble and bolt), except that counters the
// store lacks are created with their values and members in one call when
// the store is a shardcounter.Loader (PostgreSQL); a malformed line stops the
// import with its line number before anything past the last whole batch
// is written. It reads r ahead of its writes, on a goroutine of its own;
// after an early return that goroutine may finish one read of r in
// flight.
func Import(ctx context.Context, store shardcounter.CounterStore, r io.Reader, opts ImportOptions) (Stats, error) {
	dec, err := NewDecoder(r)
	if err != nil {
		return Stats{}, err
	}
	next, stop := prefetch(dec.Next)
	defer stop()
	return importRecords(ctx, store, next, opts)
}

// importRecords imports the records next returns until io.EOF. A
// members record follows its counter's.
func importRecords(ctx context.Context, store shardcounter.CounterStore, next func() (*Record, error), opts ImportOptions) (Stats, error) {
	im := &importer{store: withExpiry(store), opts: opts, ids: make(map[string]bool)}
	scale := batchScale(im.store)
	im.counters, im.applyBatch = importCounters*scale, applyBatch*scale
	for {
		rec, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return im.st, err
		}
		switch {
		case rec.Counter != nil:
			// A counter twice in one batch (an unsorted source) would be
			// resolved against the store twice and written twice.
			if len(im.pending) >= im.counters || im.items >= im.applyBatch*4 || im.sketchBytes >= sketchBatch || im.ids[rec.Counter.ID] {
				if err := im.flush(ctx); err != nil {
					return im.st, err
				}
			}
			im.pending = append(im.pending, &entry{rec: rec.Counter})
			im.ids[rec.Counter.ID] = true
			for _, b := range rec.Counter.Sketches {
				im.sketchBytes += len(b)
			}
		case rec.Ranking != nil:
			if err := im.flushAll(ctx); err != nil {
				return im.st, err
			}
			if err := im.ranking(ctx, rec.Ranking); err != nil {
				return im.st, err
			}
		case rec.Collection != nil:
			if err := im.flushAll(ctx); err != nil {
				return im.st, err
			}
			if err := im.collection(ctx, rec.Collection); err != nil {
				return im.st, err
			}
		case rec.Document != nil:
			if err := im.document(ctx, rec.Document); err != nil {
				return im.st, err
			}
		case rec.Members != nil:
			e := im.pending[len(im.pending)-1] // the decoder checked that it is the members' counter
			e.members = append(e.members, rec.Members.Members...)
			im.items += len(rec.Members.Members)
			im.st.Members += int64(len(rec.Members.Members))
			if im.items >= im.applyBatch*4 { // a large set: memory for a batch, not the set
				if err := im.flush(ctx); err != nil {
					return im.st, err
				}
			}
		}
	}
	if err := im.flushAll(ctx); err != nil {
		return im.st, err
	}
	return im.st, im.flushDocs(ctx)
}

// flushAll writes every pending counter (the first collection line ends
// the counters).
func (im *importer) flushAll(ctx context.Context) error {
	if err := im.flush(ctx); err != nil {
		return err
	}
	im.pending = nil
	return nil
}

func (im *importer) now() time.Time {
	if im.opts.Clock != nil {
		return im.opts.Clock.Now()
	}
	return time.Now()
}

// entry is a counter of the export on its way into the store.
type entry struct {
	rec      *Counter
	members  []string  // not yet written
	resolved bool      // the store was asked whether it has the counter
	skip     bool      // it has it with other options: leave it alone
	missing  bool      // it has not: create it
	planned  bool      // its value and buckets are written (only members may follow)
	createAt time.Time // when not zero, the time to create it at
	cur      int64     // the store's value
	curBkt   map[time.Time]int64
}

type importer struct {
	store   *expiry.Store
	opts    ImportOptions
	pending []*entry
	ids     map[string]bool // of pending
	items   int             // members pending
	// sketchBytes are the bytes of the pending counters' sketches.
	sketchBytes int
	coll        *collImport // the collection being imported
	st          Stats
	// counters and applyBatch are importCounters and applyBatch scaled
	// for the store (batchScale).
	counters, applyBatch int
}

// flush writes the pending counters. The last one stays pending, since
// members lines may follow it; its members are written and dropped.
func (im *importer) flush(ctx context.Context) error {
	if len(im.pending) == 0 {
		return nil
	}
	if err := im.resolve(ctx); err != nil {
		return err
	}
	planned, err := im.load(ctx)
	if err != nil {
		return err
	}
	groups := map[time.Time][]shardcounter.Increment{} // by clock time; zero: now
	var creates []*entry
	for _, e := range im.pending {
		if e.skip {
			continue
		}
		if !e.planned {
			e.planned = true
			n, err := im.plan(e, groups)
			if err != nil {
				return err
			}
			// A windowed counter is created at the present, not at a
			// bucket's time: the store's clock is held only for writes.
			if e.missing && (e.rec.Window != nil || n == 0 && len(e.members) == 0) {
				creates = append(creates, e)
				e.missing = false
			}
			planned = append(planned, e)
			im.opts.Progress.Add(1)
		}
		for _, m := range e.members {
			groups[time.Time{}] = append(groups[time.Time{}], im.inc(e, shardcounter.Increment{Counter: e.rec.ID, Member: m, Delta: 1}))
		}
		e.members = nil
	}
	for _, e := range creates {
		// A windowed counter is created as of its first write, the
		// rest's or its oldest bucket's, so that its created_at says
		// whether its buckets hold all of its value (verify relies on
		// it).
		if !e.createAt.IsZero() && im.opts.Clock != nil {
			im.opts.Clock.hold(e.createAt)
		}
		_, err := im.store.CreateCounter(ctx, e.rec.ID, e.rec.Spec())
		if im.opts.Clock != nil {
			im.opts.Clock.release()
		}
		if err != nil && shardcounter.ErrorCode(err) != shardcounter.EEXISTS {
			return fmt.Errorf("create counter %q: %w", e.rec.ID, err)
		}
	}
	if err := im.apply(ctx, groups); err != nil {
		return err
	}
	if err := im.deadlines(ctx, planned); err != nil {
		return err
	}
	im.pending[len(im.pending)-1].missing = false
	im.pending, im.items, im.sketchBytes = im.pending[len(im.pending)-1:], 0, 0
	clear(im.ids)
	im.ids[im.pending[0].rec.ID] = true
	return nil
}

// resolve asks the store which pending counters it has, with what
// options and values.
func (im *importer) resolve(ctx context.Context) error {
	var todo []*entry
	for _, e := range im.pending {
		if !e.resolved {
			todo = append(todo, e)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	for len(todo) > 0 {
		n := min(len(todo), shardcounter.MaxReadBatch)
		if err := im.resolveSome(ctx, todo[:n]); err != nil {
			return err
		}
		todo = todo[n:]
	}
	return nil
}

// resolveSome resolves up to MaxReadBatch entries with one ReadCounters.
func (im *importer) resolveSome(ctx context.Context, todo []*entry) error {
	ids := make([]string, len(todo))
	for i, e := range todo {
		ids[i] = e.rec.ID
	}
	readings, err := im.store.ReadCounters(ctx, ids)
	if err != nil {
		return err
	}
	for i, e := range todo {
		e.resolved = true
		if readings[i] == nil {
			e.missing = true
			continue
		}
		if err := im.existing(ctx, e, readings[i].Value); err != nil {
			return err
		}
	}
	return nil
}

// existing decides what to do with a counter the store has.
func (im *importer) existing(ctx context.Context, e *entry, value int64) error {
	c, err := im.store.GetCounter(ctx, e.rec.ID)
	if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
		e.missing = true
		return nil
	}
	if err != nil {
		return err
	}
	if !c.Spec.Equal(e.rec.Spec()) {
		if !im.opts.Replace {
			e.skip = true
			im.st.Conflicts++
			if im.opts.Conflict != nil {
				im.opts.Conflict(e.rec.ID, c.Spec, e.rec.Spec())
			}
			return nil
		}
		if err := im.store.DeleteCounter(ctx, e.rec.ID); err != nil && shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
			return fmt.Errorf("replace counter %q: %w", e.rec.ID, err)
		}
		im.st.Replaced++
		e.missing = true
		return nil
	}
	e.cur = value
	if w := e.rec.Window; w != nil {
		from, to := retention(w, time.Now())
		bs, err := im.store.ReadSeries(ctx, e.rec.ID, from, to)
		if err != nil {
			return err
		}
		e.curBkt = make(map[time.Time]int64, len(bs))
		for _, b := range bs {
			e.curBkt[b.Start] = b.Value
		}
	}
	return nil
}

// plan adds the increments that take a sum counter from what the store
// holds to what the export says, grouped by the clock time to write them
// at, and returns how many.
func (im *importer) plan(e *entry, groups map[time.Time][]shardcounter.Increment) (int, error) {
	im.st.Counters++
	switch e.rec.Kind {
	case shardcounter.KindDistinct:
		return 0, nil
	case shardcounter.KindApprox:
		return im.planSketches(e, groups), nil
	}
	n := 0
	add := func(at time.Time, d int64) {
		if d != 0 {
			groups[at] = append(groups[at], im.inc(e, shardcounter.Increment{Counter: e.rec.ID, Delta: d}))
			n++
		}
	}
	rest := e.rec.Value - e.cur
	if w := e.rec.Window; w != nil && (len(e.rec.Buckets) > 0 || len(e.curBkt) > 0) {
		for _, b := range e.rec.Buckets {
			d := b.Value - e.curBkt[b.Start]
			if d != 0 && im.opts.Clock == nil {
				return 0, fmt.Errorf("counter %q: its window buckets can only be written by an import into a store opened on its clock: import with --store DSN", e.rec.ID)
			}
			add(b.Start, d)
			rest -= d
		}
		im.st.Buckets += int64(len(e.rec.Buckets))
		// What the buckets do not hold was written before the retention:
		// it goes to a bucket already past it, which no read covers and
		// the counter's next write sweeps.
		if rest != 0 && im.opts.Clock == nil {
			return 0, fmt.Errorf("counter %q: its value outside its window can only be written by an import into a store opened on its clock: import with --store DSN", e.rec.ID)
		}
		from, _ := retention(w, time.Now())
		at := from.Add(-time.Duration(w.Retention))
		add(at, rest)
		switch {
		case rest != 0:
			e.createAt = at
		case len(e.rec.Buckets) > 0:
			e.createAt = e.rec.Buckets[0].Start
		}
		return n, nil
	}
	add(time.Time{}, rest)
	return n, nil
}

// planSketches adds an approx counter's sketches, each merged into its
// own shard (Pick is the shard's index: the counter has the export's
// shard count, or import left it alone), and returns how many. A merge
// of registers the shard holds already changes nothing, so a second
// import leaves the counter as the first did; registers the store holds
// and the export lacks are kept, as members are.
func (im *importer) planSketches(e *entry, groups map[time.Time][]shardcounter.Increment) int {
	n := 0
	for i, b := range e.rec.Sketches {
		if len(b) == 0 {
			continue
		}
		inc := im.inc(e, shardcounter.Increment{Counter: e.rec.ID, Sketch: b})
		inc.Pick = uint64(i)
		groups[time.Time{}] = append(groups[time.Time{}], inc)
		n++
	}
	return n
}

func (im *importer) inc(e *entry, inc shardcounter.Increment) shardcounter.Increment {
	inc.Pick = rand.Uint64()
	if e.missing {
		spec := e.rec.Spec()
		inc.Create = &spec
	}
	return inc
}

// chunk returns how many of incs one Apply call carries: applyBatch, or
// fewer when their sketches would pass sketchBatch bytes (at least one).
func chunk(incs []shardcounter.Increment, limit int) int {
	size := 0
	for i, inc := range incs[:min(len(incs), limit)] {
		size += len(inc.Sketch)
		if size > sketchBatch && i > 0 {
			return i
		}
	}
	return min(len(incs), limit)
}

// apply applies the groups in time order, the present last, holding the
// clock at each group's time.
func (im *importer) apply(ctx context.Context, groups map[time.Time][]shardcounter.Increment) error {
	times := make([]time.Time, 0, len(groups))
	for t := range groups {
		if !t.IsZero() {
			times = append(times, t)
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	times = append(times, time.Time{})
	defer func() {
		if im.opts.Clock != nil {
			im.opts.Clock.release()
		}
	}()
	for _, t := range times {
		if im.opts.Clock != nil {
			if t.IsZero() {
				im.opts.Clock.release()
			} else {
				im.opts.Clock.hold(t)
			}
		}
		incs := groups[t]
		for len(incs) > 0 {
			n := chunk(incs, im.applyBatch)
			outs, err := im.store.Apply(ctx, incs[:n])
			if err != nil {
				return err
			}
			for i, o := range outs {
				if o.Err != nil {
					return fmt.Errorf("counter %q: %w", incs[i].Counter, o.Err)
				}
			}
			incs = incs[n:]
		}
	}
	return nil
}
