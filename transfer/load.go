package transfer

import (
	"context"
	"sync"

	"github.com/shardcounter/shardcounter"
)

// loadChunk is how many counters one LoadCounters call carries; a flush's
// chunks are loaded at once on as many connections, so that the store's
// work for them (its inserts and foreign key checks, bound by its CPU)
// proceeds in parallel.
const loadChunk = 1000

// load creates the pending counters that the store lacks through its
// Loader, when it has one: far fewer rows and decisions than Apply's
// increments. A counter the loader creates is done (its deadline is set
// with the rest); one it finds existing after all (made meanwhile) stays
// missing, for the general path, which writes it through Apply as
// before. Left to the general path as well: windowed counters, whose
// buckets go at their times, approx counters, whose sketches go on their
// shards, and names that hold a deadline record
// (expired, as the counter reads missing), which the general path
// purges first.
func (im *importer) load(ctx context.Context) ([]*entry, error) {
	l, ok := shardcounter.As[shardcounter.Loader](im.store)
	if !ok {
		return nil, nil
	}
	var todo []*entry
	var cs []shardcounter.NewCounter
	for _, e := range im.pending {
		if !e.missing || e.planned || e.skip || e.rec.Window != nil || e.rec.Kind == shardcounter.KindApprox {
			continue
		}
		// Resolving read the names' deadlines into the wrapper's cache:
		// this is no further read.
		d, err := im.store.Deadline(ctx, shardcounter.NameOf(e.rec.ID))
		if err != nil {
			return nil, err
		}
		if d != 0 {
			continue
		}
		todo = append(todo, e)
		cs = append(cs, shardcounter.NewCounter{ID: e.rec.ID, Spec: e.rec.Spec(), Value: e.rec.Value, Members: e.members})
	}
	if len(cs) == 0 {
		return nil, nil
	}
	created := make([]bool, len(cs))
	var wg sync.WaitGroup
	errs := make([]error, (len(cs)+loadChunk-1)/loadChunk)
	for i := range errs {
		from, to := i*loadChunk, min(len(cs), (i+1)*loadChunk)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := l.LoadCounters(ctx, cs[from:to])
			if err == nil {
				copy(created[from:to], c)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	var done []*entry
	for i, e := range todo {
		if !created[i] {
			continue
		}
		e.planned, e.missing, e.members = true, false, nil
		im.st.Counters++
		im.opts.Progress.Add(1)
		done = append(done, e)
	}
	for _, err := range errs {
		if err != nil {
			return done, err
		}
	}
	return done, nil
}
