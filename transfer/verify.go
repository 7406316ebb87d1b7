package transfer

import (
	"context"
	"fmt"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/sketch"
)

// Drift is a counter whose numbers disagree: what the store answers as
// its value and what a recount finds.
type Drift struct {
	ID      string
	What    string // "shards", "members", "buckets" or "sketches"
	Value   int64  // the value the store answers (ReadCounters)
	Recount int64  // the recount
}

func (d Drift) String() string {
	if d.What == "sketches" {
		return fmt.Sprintf("counter %q: value %d, but the union of its shards' sketches estimates %d", d.ID, d.Value, d.Recount)
	}
	return fmt.Sprintf("counter %q: value %d, but its %s sum to %d", d.ID, d.Value, d.What, d.Recount)
}

// recheck is how many times a disagreement is read again before it is
// drift: on a live store a write may land between the two reads.
const recheck = 3

// VerifyOptions configure Verify.
type VerifyOptions struct {
	Prefix   string
	Progress *Progress
	// Drift, when set, is told of each drift as it is found.
	Drift func(Drift)
}

// Verify recounts every counter whose id starts with opts.Prefix and
// compares the recount with the value the store answers: the sum of its
// shards as ReadShards reads them (from disk on Pebble, whose values are
// answered from memory), for a distinct counter the number of its
// members, for an approx counter the estimate of the union of its shards'
// sketches, and for a windowed counter whose every write lies in its
// retention the sum of its buckets. It reads a page of counters at a time, so it runs in bounded
// memory against a live store; a disagreement is read again a few times
// before it counts, since a write may land between two reads. It returns
// the counters checked and the drifts found. Internal records are
// checked too and not counted.
func Verify(ctx context.Context, store shardcounter.CounterStore, opts VerifyOptions) (int64, []Drift, error) {
	var n int64
	var drifts []Drift
	after := ""
	for {
		page, err := store.ListCounters(ctx, opts.Prefix, after, pageSize)
		if err != nil {
			return n, drifts, err
		}
		for _, c := range page {
			d, err := verifyCounter(ctx, store, c)
			if err != nil {
				return n, drifts, fmt.Errorf("counter %q: %w", c.ID, err)
			}
			// Internal records (deadlines and their index, package
			// expiry) are checked as any counter, since a drift in one
			// is a wrong deadline, but counted as none: the count is of
			// the user's counters, as export's is.
			if !shardcounter.IsInternalID(c.ID) {
				n++
				opts.Progress.Add(1)
			}
			if d != nil {
				drifts = append(drifts, *d)
				if opts.Drift != nil {
					opts.Drift(*d)
				}
			}
		}
		if len(page) < pageSize {
			return n, drifts, nil
		}
		after = page[len(page)-1].ID
	}
}

func verifyCounter(ctx context.Context, store shardcounter.CounterStore, c *shardcounter.Counter) (*Drift, error) {
	var d *Drift
	for range recheck {
		rs, err := store.ReadCounters(ctx, []string{c.ID})
		if err != nil {
			return nil, err
		}
		if rs[0] == nil {
			return nil, nil // deleted since the listing
		}
		d = nil
		if c.Kind == shardcounter.KindApprox {
			if d, err = verifyApprox(ctx, store, c.ID, rs[0].Value); err != nil {
				return nil, err
			}
			if d != nil {
				continue
			}
			return nil, nil
		}
		_, shards, err := store.ReadShards(ctx, c.ID)
		if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var sum int64
		for _, v := range shards {
			sum += v
		}
		if sum != rs[0].Value {
			d = &Drift{ID: c.ID, What: "shards", Value: rs[0].Value, Recount: sum}
			continue
		}
		if c.Window != nil {
			if d, err = verifyWindow(ctx, store, c, rs[0].Value); err != nil {
				return nil, err
			}
			if d != nil {
				continue
			}
		}
		if c.Kind == shardcounter.KindDistinct {
			m, err := countMembers(ctx, store, c.ID)
			if err != nil {
				return nil, err
			}
			if m != rs[0].Value {
				d = &Drift{ID: c.ID, What: "members", Value: rs[0].Value, Recount: m}
				continue
			}
		}
		return nil, nil
	}
	return d, nil
}

// verifyApprox compares an approx counter's value with the estimate of
// the union of its shards' sketches, read again in one snapshot
// (ReadSketches). Its shards' own estimates (ReadShards) are not
// compared: an estimate of a union is made from the registers, not by
// adding estimates, so they need not sum to it.
func verifyApprox(ctx context.Context, store shardcounter.CounterStore, id string, value int64) (*Drift, error) {
	_, sks, err := store.ReadSketches(ctx, id)
	if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	n, err := sketch.Count(sks)
	if err != nil {
		return nil, err
	}
	if n != value {
		return &Drift{ID: id, What: "sketches", Value: value, Recount: n}, nil
	}
	return nil, nil
}

// verifyWindow compares a windowed counter's buckets with its value when
// every write to it lies in a bucket the window keeps: when it was
// created within the retention (an import creates a counter with writes
// older than its window as of then). Older counters' early writes are in
// the value and in no bucket, and are not checked.
func verifyWindow(ctx context.Context, store shardcounter.CounterStore, c *shardcounter.Counter, value int64) (*Drift, error) {
	w := c.Window
	from, to := retention(w, time.Now())
	if c.CreatedAt.Before(from) {
		return nil, nil
	}
	bs, err := store.ReadSeries(ctx, c.ID, w.BucketOf(c.CreatedAt), to)
	if err != nil {
		return nil, err
	}
	var sum int64
	for _, b := range bs {
		sum += b.Value
	}
	if sum != value {
		return &Drift{ID: c.ID, What: "buckets", Value: value, Recount: sum}, nil
	}
	return nil, nil
}

func countMembers(ctx context.Context, store shardcounter.CounterStore, id string) (int64, error) {
	var n int64
	after := ""
	for {
		ms, err := store.ListMembers(ctx, id, after, shardcounter.MaxListLimit)
		if err != nil {
			return n, err
		}
		n += int64(len(ms))
		if len(ms) < shardcounter.MaxListLimit {
			return n, nil
		}
		after = ms[len(ms)-1]
	}
}
