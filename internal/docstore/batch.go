package docstore

import (
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
)

// Own is a request id's or a member's record as a batch read it: Of, its
// counter's created_at when it was written, so that one a deleted counter
// left is not taken for one of the counter made again under its id; At,
// when a request id was recorded; Version, the update time a Firestore
// commit states as its precondition.
type Own struct{ Of, At, Version time.Time }

// Wanted returns the request ids and the members a batch reads beside its
// counters' shards, each once, in its items' order, of the counters
// whose spec read says it reads (ok): the request ids decide may ask
// about (a take's also under shardcounter.RefusedRequestID, where a
// refused take records it), and the valid members of counters that keep
// members, by the store's guess of their spec (nil: none, then the
// item's Create): an approx counter keeps none. A guess need not match
// the counter (a reshard or a delete empties a cache): a store reads what
// the counter as read shows were missed.
func Wanted(incs []shardcounter.Increment, read func(counter string) (spec *shardcounter.Spec, ok bool)) (reqs, members []Key) {
	seen := map[Key]bool{}
	for _, r := range decide.Reads(incs) {
		if _, ok := read(r.Counter); ok && r.RequestID != "" && !seen[Key{r.Counter, r.RequestID}] {
			seen[Key{r.Counter, r.RequestID}] = true
			reqs = append(reqs, Key{r.Counter, r.RequestID})
		}
	}
	seen = map[Key]bool{}
	for _, inc := range incs {
		k := Key{inc.Counter, inc.Member}
		spec, ok := read(inc.Counter)
		if spec == nil {
			spec = inc.Create
		}
		if ok && inc.Member != "" && (spec == nil || !IsApprox(spec.Kind)) && shardcounter.ValidateID("member", inc.Member) == nil && !seen[k] {
			seen[k] = true
			members = append(members, k)
		}
	}
	return reqs, members
}

// NewView is an empty view of store's batch.
func NewView(store string) View {
	return View{Store: store, Targets: map[string]*Target{}, Requests: map[Key]Request{}}
}

// TakeOwn takes into the view the request ids and members read (nil:
// none) of its counters that exist, created at created(id): a record is
// the counter's when its Of is created.
func (v *View) TakeOwn(reqs, members map[Key]*Own, created func(id string) time.Time) {
	for k, r := range reqs {
		if t := v.Targets[k.Counter]; t != nil && t.Spec != nil && r != nil {
			v.Requests[k] = Request{At: r.At, Seen: r.Of.Equal(created(k.Counter))}
		}
	}
	for k, r := range members {
		if t := v.Targets[k.Counter]; t != nil && t.Spec != nil {
			if t.Members == nil {
				t.Members = map[string]bool{}
			}
			t.Members[k.ID] = r != nil && r.Of.Equal(created(k.Counter))
		}
	}
}

// SweepBatch bounds the buckets one batch deletes per counter.
const SweepBatch = 64

// Sweep returns the buckets past retention of the windowed counters the
// batch writes (not those it creates), found by find (the store's keys of
// up to SweepBatch buckets of counter id that start before cut), for the
// commit to delete: a few per counter and batch, so the work follows the
// writes.
func Sweep[K any](v *View, order []string, find func(id string, cut time.Time) ([]K, error)) ([]K, error) {
	var out []K
	for _, id := range order {
		if t := v.Targets[id]; t.Touched && !t.Create && len(t.Buckets) > 0 {
			ks, err := find(id, t.Buckets[0].Sweep)
			if err != nil {
				return nil, err
			}
			out = append(out, ks...)
		}
	}
	return out, nil
}
