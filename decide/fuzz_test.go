package decide_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/internal/overflow"
	"github.com/shardcounter/shardcounter/sketch"
)

// FuzzDecide decides random batches on random views and checks what must
// hold of any decision: no panic; each outcome one of applied, duplicate,
// unchanged or an error; the mutations consistent with the view and the
// outcomes (totals and shard values are the old ones plus the deltas,
// each applied request id recorded once, nothing written for an item that
// did not apply); the same decision again on the same view; and, on a
// view that knows every total and shard, the same outcomes and the same
// data as deciding the items one at a time, each on the data the ones
// before it left.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"))
	f.Add([]byte("\xff\x00\xff\x00\x80\x7f\x10\x20\x30\x40\x50\x60\x70\x80\x90\xa0\xb0\xc0\xd0\xe0\xf0"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &gen{data: data}
		mode := g.n(4) // 0, 1: exact with shards; 2: exact, no shards; 3: partial
		v, incs := g.view(mode), g.batch()
		check(t, v, incs, mode)
	})
}

// TestDecideRandom runs FuzzDecide's checks on many pseudo-random inputs,
// so that a plain go test covers them too.
func TestDecideRandom(t *testing.T) {
	seed := uint64(1)
	for range 3000 {
		data := make([]byte, 96)
		for i := range data {
			seed = seed*6364136223846793005 + 1442695040888963407
			data[i] = byte(seed >> 56)
		}
		g := &gen{data: data}
		mode := g.n(4)
		v, incs := g.view(mode), g.batch()
		check(t, v, incs, mode)
		if t.Failed() {
			t.Fatalf("input %x", data)
		}
	}
}

// gen draws choices from fuzz data: 0 once it runs out.
type gen struct {
	data []byte
	i    int
}

func (g *gen) n(k int) int {
	if g.i >= len(g.data) {
		return 0
	}
	g.i++
	return int(g.data[g.i-1]) % k
}

var values = []int64{0, 1, -1, 5, -7, math.MaxInt64, math.MinInt64, math.MaxInt64 / 2, math.MinInt64 / 2, math.MaxInt64 - 2, 1000}

func (g *gen) value() int64 { return values[g.n(len(values))] }

func (g *gen) spec() shardcounter.Spec {
	s := shardcounter.Spec{Shards: 1 + g.n(3), Kind: []shardcounter.Kind{shardcounter.KindSum, shardcounter.KindSum, "", shardcounter.KindDistinct, shardcounter.KindApprox}[g.n(5)]}
	if s.Kind == shardcounter.KindDistinct || s.Kind == shardcounter.KindApprox {
		return s
	}
	switch g.n(4) {
	case 1:
		s.Min = ptr(-int64(g.n(10)))
	case 2:
		s.Max = ptr(int64(g.n(10)))
	case 3:
		s.Window = &shardcounter.Window{Bucket: shardcounter.BucketMinute, Retention: shardcounter.Duration(time.Hour)}
	}
	return s
}

const counters = 4

// view makes a random view of counters c0 to c3: mode 0 and 1 know every
// shard and total, 2 every total and no shard, 3 the shards but no total.
func (g *gen) view(mode int) *view {
	v := newView()
	v.noShards = mode == 2
	v.noBuckets = g.n(3) == 0
	for c := range counters {
		id := fmt.Sprint("c", c)
		if g.n(4) == 0 {
			if g.n(2) == 0 {
				v.counters[id] = decide.Counter{Exists: true, Unborn: true, Spec: g.spec()}
			}
			continue
		}
		spec := g.spec()
		v.counters[id] = decide.Counter{Exists: true, Spec: spec}
		vals := make([]int64, spec.Shards)
		for i := range vals {
			if g.n(2) == 0 {
				vals[i] = g.value()
			}
			if spec.Kind == shardcounter.KindDistinct {
				vals[i] = int64(g.n(3))
			}
		}
		v.setShards(id, vals...)
		cv := v.counters[id]
		if _, ok := overflow.Sum(vals); !ok {
			cv.Sum = decide.SumOverflows
		}
		if mode == 3 && cv.Sum == decide.SumExact {
			cv.Sum = []decide.Sum{decide.SumInZone, decide.SumUnknown}[g.n(2)]
		}
		v.counters[id] = cv
		for m := range 3 {
			if g.n(2) == 0 {
				v.members[fmt.Sprintf("%s/m%d", id, m)] = true
			}
		}
		for r := range 3 {
			switch g.n(3) {
			case 1:
				v.requests[fmt.Sprintf("%s/r%d", id, r)] = now.Add(-time.Minute)
			case 2:
				v.requests[fmt.Sprintf("%s/r%d", id, r)] = cutoff.Add(-time.Minute)
			}
		}
		if spec.Window != nil && g.n(2) == 0 {
			v.buckets[fmt.Sprintf("%s/%d", id, spec.Window.BucketOf(now).Unix())] = g.value()
		}
		if spec.Kind == shardcounter.KindApprox {
			for i := range spec.Shards {
				switch g.n(4) {
				case 1:
					s := sketch.New()
					s.Add(fmt.Sprint("m", g.n(3)))
					v.sketches[fmt.Sprintf("%s/%d", id, i)] = s.Encode()
				case 2:
					v.sketches[fmt.Sprintf("%s/%d", id, i)] = []byte{9, 9}
				}
			}
		}
	}
	return v
}

func (g *gen) batch() []shardcounter.Increment {
	incs := make([]shardcounter.Increment, g.n(24))
	for i := range incs {
		inc := shardcounter.Increment{Counter: fmt.Sprint("c", g.n(counters)), Pick: uint64(g.n(7)), Total: g.n(3) == 0}
		switch g.n(6) {
		case 0, 1:
			inc.Delta = g.value()
		case 2, 3:
			inc.Member, inc.Delta = fmt.Sprint("m", g.n(3)), []int64{1, -1}[g.n(2)]
		case 4:
			s := sketch.New()
			s.Add(fmt.Sprint("m", g.n(4)))
			inc.Sketch = s.Encode()
		default:
			inc.Delta = int64(g.n(3)) // 0 is invalid
		}
		if g.n(2) == 0 {
			inc.RequestID = fmt.Sprint("r", g.n(3))
		}
		if g.n(3) == 0 {
			inc.Create = ptr(g.spec())
		}
		incs[i] = inc
	}
	return incs
}

// clone returns a deep enough copy of v to decide on again.
func (v *view) clone() *view {
	c := *v
	c.counters, c.shards, c.requests = clone(v.counters), clone(v.shards), clone(v.requests)
	c.members, c.buckets, c.sketches = clone(v.members), clone(v.buckets), clone(v.sketches)
	c.asked = nil
	return &c
}

func clone[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m))
	for k, x := range m {
		c[k] = x
	}
	return c
}

// write encodes m into v as a store would: v becomes the view after the
// batch.
func (v *view) write(m decide.Mutations) {
	for _, c := range m.Counters {
		cv := v.counters[c.ID]
		if c.Create {
			cv = decide.Counter{Exists: true, Spec: *c.Spec}
		}
		if c.TotalKnown {
			cv.Total = c.Total
		}
		v.counters[c.ID] = cv
	}
	for _, s := range m.Shards {
		k := fmt.Sprintf("%s/%d", s.Counter, s.Shard)
		if s.Known {
			v.shards[k] = s.Value
		} else {
			v.shards[k] += s.Delta
		}
	}
	for _, mw := range m.Members {
		if mw.Present {
			v.members[mw.Counter+"/"+mw.Member] = true
		} else {
			delete(v.members, mw.Counter+"/"+mw.Member)
		}
	}
	for _, r := range m.Requests {
		v.requests[r.Counter+"/"+r.ID] = now
	}
	for _, b := range m.Buckets {
		k := fmt.Sprintf("%s/%d", b.Counter, b.Start.Unix())
		if b.Known {
			v.buckets[k] = b.Value
		} else {
			v.buckets[k] += b.Delta
		}
	}
	for _, s := range m.Sketches {
		v.sketches[fmt.Sprintf("%s/%d", s.Counter, s.Shard)] = s.New
	}
}

func check(t *testing.T, v *view, incs []shardcounter.Increment, mode int) {
	t.Helper()
	before := v.clone()
	out := make([]shardcounter.Outcome, len(incs))
	m, err := decide.Decide(v, decide.Batch{Incs: incs, Now: now, Cutoff: cutoff}, out)
	var nw *decide.NeedWhole
	if errors.As(err, &nw) {
		if mode != 3 {
			t.Fatalf("NeedWhole %v of a view that knows every total", nw.Counters)
		}
		for _, id := range nw.Counters {
			if s := before.counters[id].Sum; s != decide.SumInZone && s != decide.SumUnknown {
				t.Errorf("NeedWhole names %s, whose total the view knows", id)
			}
		}
		return
	}
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}

	again := before.clone()
	out2 := make([]shardcounter.Outcome, len(incs))
	m2, err := decide.Decide(again, decide.Batch{Incs: incs, Now: now, Cutoff: cutoff}, out2)
	if err != nil || !reflect.DeepEqual(m, m2) || !reflect.DeepEqual(out, out2) {
		t.Fatalf("decided again: %v, %+v, %+v; want %+v, %+v", err, m2, out2, m, out)
	}

	written := map[string]decide.CounterWrite{}
	for _, c := range m.Counters {
		if _, ok := written[c.ID]; ok {
			t.Errorf("counter %s written twice", c.ID)
		}
		written[c.ID] = c
		if bc := before.counters[c.ID]; c.Create == (bc.Exists && !bc.Unborn) {
			t.Errorf("counter %s: Create %v, but it existed before: %v", c.ID, c.Create, bc.Exists && !bc.Unborn)
		}
	}
	applied, recorded := map[string]bool{}, map[string]bool{}
	for i, o := range out {
		inc := incs[i]
		if o.Err != nil && (o.Duplicate || o.Unchanged || o.Total != nil) || o.Duplicate && o.Unchanged {
			t.Errorf("item %d: outcome %+v is more than one thing", i, o)
		}
		if o.Err == nil && !o.Duplicate {
			applied[inc.Counter] = true
			if inc.RequestID != "" {
				recorded[inc.Counter+"/"+inc.RequestID] = true
			}
		}
		if o.Total != nil && (!written[inc.Counter].TotalKnown && !o.Duplicate || written[inc.Counter].TotalKnown && *o.Total != written[inc.Counter].Total) {
			if c, ok := written[inc.Counter]; ok || !o.Duplicate {
				t.Errorf("item %d: total %d, counter written %+v", i, *o.Total, c)
			}
		}
	}
	for id := range applied {
		if _, ok := written[id]; !ok {
			t.Errorf("counter %s: an item applied, and it is not among the counters written", id)
		}
	}
	if len(m.Requests) != len(recorded) {
		t.Errorf("%d request ids recorded, %d items with one applied", len(m.Requests), len(recorded))
	}
	for _, r := range m.Requests {
		if !recorded[r.Counter+"/"+r.ID] {
			t.Errorf("request %s/%s recorded by no applied item", r.Counter, r.ID)
		}
	}

	// Totals are the old ones plus the deltas, summed exactly.
	deltas := map[string][]int64{}
	for _, s := range m.Shards {
		if _, ok := written[s.Counter]; !ok {
			t.Fatalf("shard write %+v of a counter not written", s)
		}
		deltas[s.Counter] = append(deltas[s.Counter], s.Delta)
	}
	for _, c := range m.Counters {
		old := before.counters[c.ID].Total
		if c.Create {
			old = 0
		}
		if got, ok := overflow.Sum(append(deltas[c.ID], old)); c.TotalKnown && (!ok || got != c.Total) {
			t.Errorf("counter %s: total %d after deltas %v on %d", c.ID, c.Total, deltas[c.ID], old)
		}
	}
	after := before.clone()
	after.write(m)
	if mode == 2 || mode == 3 {
		return
	}
	for _, s := range m.Shards {
		if !s.Known {
			t.Errorf("shard write %+v: value unknown on a view that knows it", s)
		}
	}

	// One at a time: each item alone, on what the ones before it left.
	seq := before.clone()
	for i, inc := range incs {
		o := make([]shardcounter.Outcome, 1)
		apx := seq.counters[inc.Counter].Spec.Kind == shardcounter.KindApprox || inc.Create != nil && inc.Create.Kind == shardcounter.KindApprox && !seq.counters[inc.Counter].Exists
		mi, err := decide.Decide(seq, decide.Batch{Incs: []shardcounter.Increment{inc}, Now: now, Cutoff: cutoff}, o)
		if err != nil {
			t.Fatalf("item %d alone: %v", i, err)
		}
		seq.write(mi)
		// Totals differ (the batch's are after the batch), and an approx
		// item's Unchanged is its shard's in the batch.
		if got, want := class(o[0], apx), class(out[i], apx); got != want {
			t.Errorf("item %d %+v: alone %s, in the batch %s", i, inc, got, want)
		}
	}
	seq.asked, after.asked = nil, nil
	if !reflect.DeepEqual(seq.members, after.members) || !reflect.DeepEqual(seq.requests, after.requests) || !reflect.DeepEqual(seq.shards, after.shards) || !reflect.DeepEqual(seq.buckets, after.buckets) || !reflect.DeepEqual(seq.counters, after.counters) {
		t.Errorf("one at a time leaves %+v\nthe batch %+v", seq, after)
	}
}

// class words an outcome without its total; with apx, unchanged is ok.
func class(o shardcounter.Outcome, apx bool) string {
	o.Total = nil
	if apx {
		o.Unchanged = false
	}
	return outcomes([]shardcounter.Outcome{o})
}
