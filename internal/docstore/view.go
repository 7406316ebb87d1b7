package docstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// View is one attempt of a batch as package decide sees it (a
// decide.View): what the attempt read, which each store fills from its
// own records, and, after Decide, what the batch writes, which each store
// turns into its own mutations. So the rules live in package decide, and
// the bookkeeping around them here, once for both stores.
type View struct {
	Store    string // "firestore", "datastore": the prefix of errors
	Targets  map[string]*Target
	Requests map[Key]Request // the request ids read
	// Records are the request ids the batch records (Decide's).
	Records []decide.RequestWrite
	// Removes are the idle limit states the batch removes (Decide's
	// decide.Mutations.Removes): the commit deletes each one's counter
	// record and shards under what the batch read of them, and the store
	// forgets what it caches of them once committed. Their request ids
	// are left to the request-id expiry: they carry the removed state's
	// created_at, which a state made again under the id does not have
	// (TakeOwn).
	Removes []string
}

// Key names a counter's request id or member.
type Key struct{ Counter, ID string }

// Request is a request id as an attempt read it: Seen when recorded, at
// At, for the counter as it is (not for an earlier one of its id).
type Request struct {
	At   time.Time
	Seen bool
}

// Target is one counter of a batch: what its attempt read, then what the
// batch decided of it.
type Target struct {
	Err error // the counter cannot be read: every item on it fails with Err
	// Spec is the counter's spec, nil while it does not exist; Decide
	// sets it on a counter the batch creates.
	Spec *shardcounter.Spec
	Full bool // every shard was read: the view gives the total
	// Vals are the shards read; after Decide, the values the batch leaves
	// in them (a created counter's shards not in Vals are 0).
	Vals     map[int]int64
	Sketches map[int][]byte       // approx shards' sketches read (nil: none)
	Members  map[string]bool      // members read: present
	Bucket   *shardcounter.Bucket // the window bucket of the batch's time, when read

	// What Decide left.
	Touched bool            // an item on it applied: the commit writes it
	Create  bool            // the batch creates it
	Written map[int]bool    // shards the batch changes
	Wide    bool            // a shard write left its shard outside the zone (decide.InZone)
	Verify  map[int]bool    // shards decided on, which must not have changed at the commit
	Present map[string]bool // members whose presence the batch changes: after it
	Buckets []decide.BucketWrite
	Sketch  map[int][]byte // approx shards' sketches the batch changes
}

// Decide decides the batch on the view: it sets out, and takes the
// mutations into the targets and Records. whole names the counters that
// must be read whole (their every shard) and decided again; nothing is
// taken in then.
func (v *View) Decide(incs []shardcounter.Increment, now, cutoff time.Time, out []shardcounter.Outcome) (whole []string, err error) {
	v.Records, v.Removes = nil, nil
	for _, t := range v.Targets {
		t.Touched, t.Create, t.Wide, t.Buckets = false, false, false, nil
		t.Written, t.Verify, t.Present, t.Sketch = map[int]bool{}, map[int]bool{}, map[string]bool{}, map[int][]byte{}
	}
	m, err := decide.Decide(v, decide.Batch{Incs: incs, Now: now, Cutoff: cutoff}, out)
	var nw *decide.NeedWhole
	if errors.As(err, &nw) {
		return nw.Counters, nil
	}
	if err != nil {
		return nil, err
	}
	for _, c := range m.Counters {
		t := v.Targets[c.ID]
		t.Touched = true
		if c.Create {
			t.Create, t.Spec, t.Vals = true, c.Spec, map[int]int64{}
		}
	}
	for _, w := range m.Shards {
		if !w.Known { // the view gives every shard decide asks for
			return nil, fmt.Errorf("%s: counter %q, shard %d: decided without its value", v.Store, w.Counter, w.Shard)
		}
		t := v.Targets[w.Counter]
		t.Vals[w.Shard], t.Written[w.Shard] = w.Value, true
		t.Wide = t.Wide || !decide.InZone(w.Value, t.Spec.Shards)
	}
	for _, w := range m.Members {
		v.Targets[w.Counter].Present[w.Member] = w.Present
	}
	for _, w := range m.Buckets {
		t := v.Targets[w.Counter]
		t.Buckets = append(t.Buckets, w)
	}
	for _, w := range m.Sketches {
		v.Targets[w.Counter].Sketch[w.Shard] = w.New
	}
	v.Records = m.Requests
	v.Removes = m.Removes
	return nil, nil
}

// The view (decide.View) answers from what the attempt read. Every shard
// decide asks about is one a Firestore commit checks, when it writes the
// counter (Verify), so that what was decided on holds at the commit.

func (v *View) Counter(id string) (decide.Counter, error) {
	t := v.Targets[id]
	switch {
	case t.Err != nil:
		return decide.Counter{Exists: true, Err: t.Err}, nil
	case t.Spec == nil:
		return decide.Counter{}, nil
	}
	c := decide.Counter{Exists: true, Spec: *t.Spec, Sum: decide.SumInZone}
	if t.Full {
		vals := make([]int64, t.Spec.Shards)
		for i := range vals {
			val, ok := t.Vals[i]
			if !ok {
				return decide.Counter{}, fmt.Errorf("%s: counter %q read whole without its shard %d", v.Store, id, i)
			}
			vals[i] = val
		}
		c.Total, c.Sum = decide.Total(vals)
	}
	return c, nil
}

func (v *View) Shard(counter string, k int) (int64, bool, error) {
	t := v.Targets[counter]
	t.Verify[k] = true
	val, ok := t.Vals[k]
	return val, ok, nil
}

func (v *View) Request(counter, id string) (time.Time, bool, error) {
	r := v.Requests[Key{counter, id}]
	return r.At, r.Seen, nil
}

func (v *View) Member(counter, member string) (bool, error) {
	t := v.Targets[counter]
	t.Verify[shard.Of(shard.ForMember(member), t.Spec.Shards)] = true // two batches never decide one member at once
	present, read := t.Members[member]
	if !read { // not known absent: deciding on it could add a present member again
		return false, fmt.Errorf("%s: counter %q: member %q decided without reading it", v.Store, counter, member)
	}
	return present, nil
}

func (v *View) Bucket(counter string, start time.Time) (int64, bool, error) {
	b := v.Targets[counter].Bucket
	if b == nil || !b.Start.Equal(start) {
		return 0, false, nil
	}
	return b.Value, true, nil
}

func (v *View) Sketch(counter string, k int) ([]byte, error) {
	t := v.Targets[counter]
	t.Verify[k] = true
	return t.Sketches[k], nil
}

// Shards returns the shards of counter id, of n, that the items of incs
// on it decide on: every shard when all (its writes check its total) or
// for a take (it decides on its key's whole state), else each item's
// (decide.Pick mod n).
func Shards(incs []shardcounter.Increment, id string, n int, all bool) map[int]bool {
	want := map[int]bool{}
	for _, inc := range incs {
		if inc.Counter != id {
			continue
		}
		if all || inc.Take != nil {
			for i := range n {
				want[i] = true
			}
			return want
		}
		want[shard.Of(decide.Pick(inc), n)] = true
	}
	return want
}
