package decide_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/internal/shard"
	"github.com/shardcounter/shardcounter/sketch"
)

var (
	now    = time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
	cutoff = now.Add(-time.Hour)
)

func ptr[T any](v T) *T { return &v }

func sum(n int) shardcounter.Spec { return shardcounter.Spec{Shards: n, Kind: shardcounter.KindSum} }

func distinct(n int) shardcounter.Spec {
	return shardcounter.Spec{Shards: n, Kind: shardcounter.KindDistinct}
}

func approx(n int) shardcounter.Spec {
	return shardcounter.Spec{Shards: n, Kind: shardcounter.KindApprox}
}

func windowed(n int) shardcounter.Spec {
	return shardcounter.Spec{Shards: n, Kind: shardcounter.KindSum, Window: &shardcounter.Window{Bucket: shardcounter.BucketHour, Retention: shardcounter.Duration(24 * time.Hour)}}
}

// outcomes words each outcome: ok, dup, unch, skip, or the error's code; "=v"
// follows an outcome with a total v.
func outcomes(out []shardcounter.Outcome) string {
	var w []string
	for _, o := range out {
		s := "ok"
		switch {
		case o.Err != nil:
			s = shardcounter.ErrorCode(o.Err)
		case o.Duplicate:
			s = "dup"
		case o.Unchanged:
			s = "unch"
		case o.Skipped:
			s = "skip"
		}
		if o.Total != nil {
			s += fmt.Sprint("=", *o.Total)
		}
		w = append(w, s)
	}
	return strings.Join(w, " ")
}

// shardsOf words shard writes: counter/shard+delta, with =value when known.
func shardsOf(m decide.Mutations) string {
	var w []string
	for _, s := range m.Shards {
		x := fmt.Sprintf("%s/%d%+d", s.Counter, s.Shard, s.Delta)
		if s.Known {
			x += fmt.Sprint("=", s.Value)
		}
		w = append(w, x)
	}
	return strings.Join(w, " ")
}

func mustDecide(t *testing.T, v *view, incs ...shardcounter.Increment) ([]shardcounter.Outcome, decide.Mutations) {
	t.Helper()
	out := make([]shardcounter.Outcome, len(incs))
	m, err := decide.Decide(v, decide.Batch{Incs: incs, Now: now, Cutoff: cutoff}, out)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return out, m
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(v *view)
		incs   []shardcounter.Increment
		want   string // outcomes
		shards string // shard writes, when not ""
		check  func(t *testing.T, v *view, m decide.Mutations)
	}{
		{
			name:  "SumApplied",
			setup: func(v *view) { v.counters["a"] = decide.Counter{Exists: true, Spec: sum(2)}; v.setShards("a", 3, 4) },
			incs: []shardcounter.Increment{
				{Counter: "a", Delta: 5, Pick: 1, Total: true},
				{Counter: "a", Delta: -2, Pick: 3, Total: true},
			},
			want: "ok=10 ok=10", shards: "a/1+3=7",
			check: func(t *testing.T, _ *view, m decide.Mutations) {
				want := []decide.CounterWrite{{ID: "a", Spec: ptr(sum(2)), Total: 10, TotalKnown: true}}
				if !reflect.DeepEqual(m.Counters, want) {
					t.Errorf("Counters = %+v, want %+v", m.Counters, want)
				}
			},
		},
		{
			name: "Invalid",
			incs: []shardcounter.Increment{{Counter: "a", Delta: 0}, {Counter: "", Delta: 1}, {Counter: "a", Member: "m", Delta: 2}},
			want: "invalid_argument invalid_argument invalid_argument",
			check: func(t *testing.T, v *view, _ decide.Mutations) {
				if len(v.asked) != 0 {
					t.Errorf("asked %q of the view for invalid items", v.asked)
				}
			},
		},
		{
			name: "CreateOnWrite",
			incs: []shardcounter.Increment{
				{Counter: "n", Delta: 1},                                            // no Create
				{Counter: "n", Member: "m", Delta: 1, Create: ptr(sum(4))},          // wrong kind for its own spec
				{Counter: "n", Delta: 2, Pick: 6, Create: ptr(sum(4)), Total: true}, // creates
				{Counter: "n", Delta: 3, Pick: 1, Create: ptr(sum(8))},              // sees the counter of 4 shards
				{Counter: "n", Delta: 1, Pick: 0, Total: true},                      // and so does an item without Create
			},
			want: "not_found invalid_argument ok=6 ok ok=6", shards: "n/2+2=2 n/1+3=3 n/0+1=1",
			check: func(t *testing.T, v *view, m decide.Mutations) {
				want := []decide.CounterWrite{{ID: "n", Spec: ptr(sum(4)), Create: true, Total: 6, TotalKnown: true}}
				if !reflect.DeepEqual(m.Counters, want) {
					t.Errorf("Counters = %+v, want %+v", m.Counters, want)
				}
				if want := []string{"counter n"}; !slices.Equal(v.asked, want) {
					t.Errorf("asked %q, want %q: a new counter's data is not asked for", v.asked, want)
				}
			},
		},
		{
			name: "CreateFailedItemCreatesNothing",
			setup: func(v *view) {
				v.counters["u"] = decide.Counter{Exists: true, Unborn: true, Spec: shardcounter.Spec{Shards: 2, Kind: shardcounter.KindSum, Max: ptr(int64(5))}}
			},
			incs: []shardcounter.Increment{
				{Counter: "u", Delta: 9, Create: &shardcounter.Spec{Shards: 2, Max: ptr(int64(5))}},
				{Counter: "u", Delta: 1, RequestID: "r"},
			},
			want: "out_of_range not_found",
			check: func(t *testing.T, _ *view, m decide.Mutations) {
				if len(m.Counters)+len(m.Shards)+len(m.Requests) != 0 {
					t.Errorf("mutations %+v, want none", m)
				}
			},
		},
		{
			name:  "Unborn",
			setup: func(v *view) { v.counters["u"] = decide.Counter{Exists: true, Unborn: true, Spec: sum(2)} },
			incs: []shardcounter.Increment{
				{Counter: "u", Delta: 1},
				{Counter: "u", Delta: 1, Pick: 1, Create: ptr(sum(3)), RequestID: "r"},
			},
			want: "not_found ok", shards: "u/1+1=1",
			check: func(t *testing.T, v *view, m decide.Mutations) {
				if !m.Counters[0].Create || m.Counters[0].Spec.Shards != 3 {
					t.Errorf("Counters = %+v, want u created with 3 shards", m.Counters)
				}
				if slices.Contains(v.asked, "request u/r") {
					t.Error("asked the request id of an unborn counter")
				}
			},
		},
		{
			name:  "Kind",
			setup: func(v *view) { v.counters["d"] = decide.Counter{Exists: true, Spec: distinct(2)} },
			incs: []shardcounter.Increment{
				{Counter: "d", Delta: 1},
				{Counter: "d", Member: "m", Delta: 1, Kind: shardcounter.KindApprox},
				{Counter: "d", Member: "m", Delta: 1, Kind: shardcounter.KindDistinct},
			},
			want: "invalid_argument invalid_argument ok",
		},
		{
			name: "Dedupe",
			setup: func(v *view) {
				v.counters["a"] = decide.Counter{Exists: true, Spec: sum(1)}
				v.requests["a/fresh"] = now.Add(-time.Minute)
				v.requests["a/old"] = cutoff
			},
			incs: []shardcounter.Increment{
				{Counter: "a", Delta: 1, RequestID: "fresh"},
				{Counter: "a", Delta: 1, RequestID: "old"},
				{Counter: "a", Delta: 1, RequestID: "old"},
				{Counter: "a", Delta: math.MaxInt64, RequestID: "new"}, // fails: records nothing
				{Counter: "a", Delta: 1, RequestID: "new"},
				{Counter: "b", Delta: 1, RequestID: "new"}, // another counter's id
			},
			want: "dup ok dup out_of_range ok not_found", shards: "a/0+2=2",
			check: func(t *testing.T, _ *view, m decide.Mutations) {
				want := []decide.RequestWrite{
					{Counter: "a", ID: "old", Expired: true, Was: cutoff},
					{Counter: "a", ID: "new"},
				}
				if !reflect.DeepEqual(m.Requests, want) {
					t.Errorf("Requests = %+v, want %+v", m.Requests, want)
				}
			},
		},
		{
			name: "Members",
			setup: func(v *view) {
				v.counters["d"] = decide.Counter{Exists: true, Spec: distinct(1), Total: 1}
				v.shards["d/0"] = 1
				v.members["d/p"] = true
			},
			incs: []shardcounter.Increment{
				{Counter: "d", Member: "p", Delta: 1, RequestID: "r1", Total: true}, // present
				{Counter: "d", Member: "q", Delta: -1},                              // absent
				{Counter: "d", Member: "q", Delta: 1},
				{Counter: "d", Member: "q", Delta: 1},
				{Counter: "d", Member: "p", Delta: -1},
				{Counter: "d", Member: "s", Delta: 1},
				{Counter: "d", Member: "s", Delta: -1, Total: true},
			},
			want: "unch=1 unch ok unch ok ok ok=1", shards: "d/0+0=1",
			check: func(t *testing.T, _ *view, m decide.Mutations) {
				want := []decide.MemberWrite{{Counter: "d", Member: "q", Present: true}, {Counter: "d", Member: "p"}}
				if !reflect.DeepEqual(m.Members, want) {
					t.Errorf("Members = %+v, want %+v", m.Members, want)
				}
				if len(m.Requests) != 1 || m.Requests[0].ID != "r1" {
					t.Errorf("Requests = %+v, want r1's: an unchanged item records its id", m.Requests)
				}
			},
		},
		{
			name: "MemberShard",
			setup: func(v *view) {
				v.counters["d"] = decide.Counter{Exists: true, Spec: distinct(7)}
			},
			incs: []shardcounter.Increment{{Counter: "d", Member: "m", Delta: 1, Pick: 3, RequestID: "r"}},
			want: "ok",
			check: func(t *testing.T, _ *view, m decide.Mutations) {
				k := shard.Of(shard.ForMember("m"), 7)
				if m.Shards[0].Shard != k || m.Members[0].Shard != k || m.Requests[0].Shard != k {
					t.Errorf("shard %d, member %+v, request %+v: want the member's shard %d", m.Shards[0].Shard, m.Members[0], m.Requests[0], k)
				}
			},
		},
		{
			name: "Bounds",
			setup: func(v *view) {
				v.counters["b"] = decide.Counter{Exists: true, Spec: shardcounter.Spec{Shards: 2, Min: ptr(int64(0)), Max: ptr(int64(3))}}
				v.setShards("b", 1, 0)
			},
			incs: []shardcounter.Increment{
				{Counter: "b", Delta: -2},
				{Counter: "b", Delta: -1},
				{Counter: "b", Delta: -1},
				{Counter: "b", Delta: 4},
				{Counter: "b", Delta: 3, Pick: 1, Total: true},
				{Counter: "b", Delta: 1},
			},
			want: "out_of_range ok out_of_range out_of_range ok=3 out_of_range", shards: "b/0-1=0 b/1+3=3",
		},
		{
			// Items conditional on a bounded one (Increment.If): skipped
			// with it, applied when it applies, even when it applies 0
			// (saturated at its bound, or a delta of 0 within it); skipped
			// after a failed item; invalid when the item is not before.
			name: "Conditional",
			setup: func(v *view) {
				v.counters["b"] = decide.Counter{Exists: true, Spec: sum(1)}
				v.counters["c"] = decide.Counter{Exists: true, Spec: sum(1)}
				v.setShards("b", 4)
				v.setShards("c", 0)
			},
			incs: []shardcounter.Increment{
				{Counter: "b", Delta: 3, Bound: &shardcounter.Bound{Lower: math.MinInt64, Upper: 5}},
				{Counter: "c", Delta: 1, If: 1},
				{Counter: "b", Delta: 3, Bound: &shardcounter.Bound{Lower: math.MinInt64, Upper: 5, Saturate: true}},
				{Counter: "c", Delta: 10, If: 3},
				{Counter: "b", Delta: 3, Bound: &shardcounter.Bound{Lower: math.MinInt64, Upper: 5, Saturate: true}},
				{Counter: "c", Delta: 100, If: 5},
				{Counter: "b", Delta: 0, Bound: &shardcounter.Bound{Lower: 0, Upper: 5}},
				{Counter: "c", Delta: 1000, If: 7},
				{Counter: "nope", Delta: 1},
				{Counter: "c", Delta: 1, If: 9},
				{Counter: "c", Delta: 1, If: 11},
				{Counter: "c", Delta: 1, If: -1},
			},
			want:   "skip skip ok ok ok ok ok ok not_found skip invalid_argument invalid_argument",
			shards: "b/0+1=5 c/0+1110=1110",
		},
		{
			name: "Int64OnTheTotal",
			setup: func(v *view) {
				v.counters["a"] = decide.Counter{Exists: true, Spec: sum(3)}
				v.setShards("a", math.MaxInt64, -10, math.MinInt64+20)
			},
			incs: []shardcounter.Increment{
				{Counter: "a", Delta: 5, Pick: 0}, // shard 0 is full: shard 1 has room
				{Counter: "a", Delta: -2, Pick: 2},
				{Counter: "a", Delta: math.MaxInt64, Pick: 1},
			},
			want: "ok ok out_of_range", shards: "a/1+5=-5 a/2-2=-9223372036854775790",
		},
		{
			name: "SumOverflows",
			setup: func(v *view) {
				v.counters["a"] = decide.Counter{Exists: true, Spec: sum(2), Sum: decide.SumOverflows}
				v.requests["a/r"] = now
			},
			incs: []shardcounter.Increment{{Counter: "a", Delta: 1, RequestID: "r"}, {Counter: "a", Delta: -1}},
			want: "dup out_of_range",
		},
		{
			name: "FullMemberShard",
			setup: func(v *view) {
				v.counters["d"] = decide.Counter{Exists: true, Spec: distinct(1), Total: -1}
				v.shards["d/0"] = math.MaxInt64
				v.shards["d/1"] = math.MinInt64
			},
			incs: []shardcounter.Increment{{Counter: "d", Member: "m", Delta: 1}},
			want: "out_of_range",
		},
		{
			name: "UnknownShards",
			setup: func(v *view) {
				v.noShards = true
				v.counters["a"] = decide.Counter{Exists: true, Spec: sum(2), Total: math.MaxInt64 - 1}
			},
			incs: []shardcounter.Increment{
				{Counter: "a", Delta: 1, Pick: 0, Total: true},
				{Counter: "a", Delta: 1, Pick: 0},
				{Counter: "a", Delta: -5, Pick: 1, Total: true},
				{Counter: "a", Delta: -1, Pick: 0},
			},
			want: "ok=9223372036854775801 out_of_range ok=9223372036854775801 ok", shards: "a/0+0 a/1-5",
		},
		{
			name: "ZoneOK",
			setup: func(v *view) {
				v.counters["z"] = decide.Counter{Exists: true, Spec: sum(2), Sum: decide.SumInZone}
				v.shards["z/1"] = 7
			},
			incs: []shardcounter.Increment{{Counter: "z", Delta: 5, Pick: 1, Total: true}},
			want: "ok", shards: "z/1+5=12",
			check: func(t *testing.T, _ *view, m decide.Mutations) {
				if m.Counters[0].TotalKnown {
					t.Errorf("Counters = %+v: a zoned view knows no total", m.Counters)
				}
			},
		},
		{
			name: "Windows",
			setup: func(v *view) {
				v.counters["w"] = decide.Counter{Exists: true, Spec: windowed(1)}
				v.buckets[fmt.Sprintf("w/%d", now.Truncate(time.Hour).Unix())] = math.MaxInt64 - 3
			},
			incs: []shardcounter.Increment{
				{Counter: "w", Delta: 2},
				{Counter: "w", Delta: 2},
				{Counter: "w", Delta: -5},
			},
			want: "ok out_of_range ok", shards: "w/0-3=-3",
			check: func(t *testing.T, _ *view, m decide.Mutations) {
				want := []decide.BucketWrite{{
					Counter: "w", Start: now.Truncate(time.Hour), Delta: -3, Value: math.MaxInt64 - 6, Known: true,
					Sweep: now.Add(-24 * time.Hour).Truncate(time.Hour),
				}}
				if !reflect.DeepEqual(m.Buckets, want) {
					t.Errorf("Buckets = %+v, want %+v", m.Buckets, want)
				}
			},
		},
		{
			name: "WindowUnknownBucket",
			setup: func(v *view) {
				v.noBuckets = true
				v.counters["w"] = decide.Counter{Exists: true, Spec: windowed(1)}
			},
			incs: []shardcounter.Increment{{Counter: "w", Delta: math.MaxInt64}, {Counter: "w", Delta: -math.MaxInt64}, {Counter: "w", Delta: -math.MaxInt64}},
			want: "ok ok ok",
			check: func(t *testing.T, _ *view, m decide.Mutations) {
				if len(m.Buckets) != 1 || m.Buckets[0].Known || m.Buckets[0].Delta != -math.MaxInt64 {
					t.Errorf("Buckets = %+v, want one unknown bucket of delta -MaxInt64", m.Buckets)
				}
			},
		},
		{
			name: "NewWindowedCounter",
			incs: []shardcounter.Increment{{Counter: "w", Delta: 4, Create: ptr(windowed(2))}},
			want: "ok",
			check: func(t *testing.T, _ *view, m decide.Mutations) {
				if len(m.Buckets) != 1 || !m.Buckets[0].Known || m.Buckets[0].Value != 4 {
					t.Errorf("Buckets = %+v, want one of value 4", m.Buckets)
				}
			},
		},
		{
			name: "Grouped",
			setup: func(v *view) {
				v.counters["a"] = decide.Counter{Exists: true, Spec: sum(4)}
				v.counters["b"] = decide.Counter{Exists: true, Spec: sum(4)}
				v.counters["d"] = decide.Counter{Exists: true, Spec: distinct(4)}
				v.members["d/m"] = true
			},
			incs: []shardcounter.Increment{
				{Counter: "d", Member: "m", Delta: 1}, // applied first, writes no shard
				{Counter: "a", Delta: 1, Pick: 0},
				{Counter: "b", Delta: 1, Pick: 0},
				{Counter: "a", Delta: 1, Pick: 1},
				{Counter: "d", Member: "m", Delta: -1},
				{Counter: "a", Delta: 1, Pick: 0},
			},
			want:   "unch ok ok ok ok ok",
			shards: fmt.Sprintf("d/%d-1=-1 a/0+2=2 a/1+1=1 b/0+1=1", shard.Of(shard.ForMember("m"), 4)),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newView()
			if tc.setup != nil {
				tc.setup(v)
			}
			v.asked = nil
			out, m := mustDecide(t, v, tc.incs...)
			if got := outcomes(out); got != tc.want {
				t.Errorf("outcomes %q, want %q", got, tc.want)
			}
			if got := shardsOf(m); tc.shards != "" && got != tc.shards {
				t.Errorf("shard writes %q, want %q", got, tc.shards)
			}
			if tc.check != nil {
				tc.check(t, v, m)
			}
		})
	}
}

func TestNeedWhole(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    decide.Counter
		val  int64
		inc  shardcounter.Increment
	}{
		{"LeavesZone", decide.Counter{Exists: true, Spec: sum(2), Sum: decide.SumInZone}, math.MaxInt64/2 - 1, shardcounter.Increment{Delta: 2}},
		{"ShardFull", decide.Counter{Exists: true, Spec: sum(1), Sum: decide.SumInZone}, math.MaxInt64, shardcounter.Increment{Delta: 1}},
		{"Bounded", decide.Counter{Exists: true, Spec: shardcounter.Spec{Shards: 2, Max: ptr(int64(9))}, Sum: decide.SumInZone}, 0, shardcounter.Increment{Delta: 1}},
		{"Unknown", decide.Counter{Exists: true, Spec: sum(2), Sum: decide.SumUnknown}, 0, shardcounter.Increment{Delta: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newView()
			v.counters["z"], v.shards["z/0"] = tc.c, tc.val
			v.counters["y"] = decide.Counter{Exists: true, Spec: sum(1), Sum: decide.SumUnknown}
			tc.inc.Counter = "z"
			incs := []shardcounter.Increment{
				tc.inc,
				{Counter: "a", Delta: 1}, // not found: decided on
				{Counter: "y", Delta: 1},
				{Counter: "z", Delta: 1},
			}
			out := make([]shardcounter.Outcome, len(incs))
			_, err := decide.Decide(v, decide.Batch{Incs: incs, Now: now, Cutoff: cutoff}, out)
			var nw *decide.NeedWhole
			if !errors.As(err, &nw) || !slices.Equal(nw.Counters, []string{"z", "y"}) {
				t.Fatalf("Decide: %v, want NeedWhole of z and y", err)
			}
		})
	}
}

func TestApprox(t *testing.T) {
	one := sketch.New()
	one.Add("x")
	merged := one.Encode()
	v := newView()
	v.counters["x"] = decide.Counter{Exists: true, Spec: approx(1)}
	v.counters["bad"] = decide.Counter{Exists: true, Spec: approx(1)}
	v.sketches["bad/0"] = []byte("not a sketch")
	out, m := mustDecide(t, v,
		shardcounter.Increment{Counter: "x", Member: "a", Delta: 1, RequestID: "r1"},
		shardcounter.Increment{Counter: "bad", Member: "a", Delta: 1, RequestID: "r2"},
		shardcounter.Increment{Counter: "x", Sketch: merged, Pick: 5, Total: true},
		shardcounter.Increment{Counter: "n", Member: "a", Delta: 1, Create: ptr(approx(2))},
		shardcounter.Increment{Counter: "x", Delta: 1},
	)
	if got, want := outcomes(out), "ok internal ok ok invalid_argument"; got != want {
		t.Errorf("outcomes %q, want %q", got, want)
	}
	if len(m.Requests) != 1 || m.Requests[0].ID != "r1" {
		t.Errorf("Requests = %+v, want r1's only: a failed item records nothing", m.Requests)
	}
	if len(m.Sketches) != 2 || m.Sketches[0].Counter != "x" || m.Sketches[1].Counter != "n" {
		t.Fatalf("Sketches = %+v, want x's and n's", m.Sketches)
	}
	if got, err := sketch.Count([][]byte{m.Sketches[0].New}); err != nil || got != 2 {
		t.Errorf("x's sketch counts %d (%v), want 2", got, err)
	}
	if len(m.Shards) != 0 || m.Counters[0].TotalKnown {
		t.Errorf("an approx counter has shard writes %+v or a total %+v", m.Shards, m.Counters)
	}

	// Sent again, the same members change nothing: every item of the
	// shard is unchanged, its request id recorded all the same.
	v.sketches["x/0"] = m.Sketches[0].New
	out, m = mustDecide(t, v,
		shardcounter.Increment{Counter: "x", Member: "a", Delta: 1, RequestID: "r3"},
		shardcounter.Increment{Counter: "x", Sketch: merged},
	)
	if got, want := outcomes(out), "unch unch"; got != want {
		t.Errorf("again: outcomes %q, want %q", got, want)
	}
	if len(m.Sketches) != 0 || len(m.Requests) != 1 {
		t.Errorf("again: Sketches %+v, Requests %+v: want no sketch and r3", m.Sketches, m.Requests)
	}
}

func TestCounterErr(t *testing.T) {
	v := newView()
	v.counters["bad"] = decide.Counter{Exists: true, Err: errView}
	v.counters["a"] = decide.Counter{Exists: true, Spec: sum(1)}
	out, m := mustDecide(t, v,
		shardcounter.Increment{Counter: "bad", Delta: 1, RequestID: "r"},
		shardcounter.Increment{Counter: "a", Delta: 1},
	)
	if !errors.Is(out[0].Err, errView) || out[1].Err != nil {
		t.Fatalf("outcomes %+v, want the counter's error on its item alone", out)
	}
	if len(m.Counters) != 1 || len(m.Requests) != 0 {
		t.Errorf("mutations %+v, want a's alone", m)
	}
}

func TestViewError(t *testing.T) {
	v := newView()
	v.fail = errView
	out := make([]shardcounter.Outcome, 1)
	if _, err := decide.Decide(v, decide.Batch{Incs: []shardcounter.Increment{{Counter: "a", Delta: 1}}, Now: now}, out); !errors.Is(err, errView) {
		t.Fatalf("Decide: %v, want the view's error", err)
	}
}

func TestFoldSketches(t *testing.T) {
	enc := func(ms ...string) []byte {
		s := sketch.New()
		for _, m := range ms {
			s.Add(m)
		}
		return s.Encode()
	}
	sk := [][]byte{enc("a"), nil, enc("b"), enc("c"), nil}
	out, folded, err := decide.FoldSketches(sk, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(folded, []int{0, 1}) || len(out) != 2 {
		t.Fatalf("folded %v into %d shards, want [0 1] into 2", folded, len(out))
	}
	for j, want := range []int64{2, 1} {
		if got, _ := sketch.Count(out[j : j+1]); got != want {
			t.Errorf("shard %d counts %d, want %d", j, got, want)
		}
	}
	if got, _ := sketch.Count(out); got != 3 {
		t.Errorf("the union counts %d, want 3", got)
	}
}

func TestReads(t *testing.T) {
	incs := []shardcounter.Increment{
		{Counter: "a", Delta: 1, Pick: 9, RequestID: "r"},
		{Counter: "a", Delta: 0},
		{Counter: "d", Member: "m", Delta: 1, Create: ptr(distinct(2))},
	}
	want := []decide.Read{
		{Item: 0, Counter: "a", Pick: 9, RequestID: "r"},
		{Item: 2, Counter: "d", Pick: shard.ForMember("m"), Member: "m", Create: incs[2].Create},
	}
	if got := decide.Reads(incs); !reflect.DeepEqual(got, want) {
		t.Errorf("Reads = %+v, want %+v", got, want)
	}
}

func TestTotal(t *testing.T) {
	if v, s := decide.Total([]int64{math.MaxInt64, 5, -10}); v != math.MaxInt64-5 || s != decide.SumExact {
		t.Errorf("Total = %d, %v; want %d exact: partial sums may leave int64", v, s, int64(math.MaxInt64-5))
	}
	if _, s := decide.Total([]int64{math.MaxInt64, 1}); s != decide.SumOverflows {
		t.Errorf("Total of MaxInt64+1: %v, want SumOverflows", s)
	}
}

func TestFoldShards(t *testing.T) {
	got, err := decide.FoldShards("a", []int64{1, -2, 3, math.MaxInt64, -4}, 2)
	if err != nil || !slices.Equal(got, []int64{0, math.MaxInt64 - 2}) {
		t.Errorf("FoldShards = %v, %v; want [0 %d]", got, err, int64(math.MaxInt64-2))
	}
	if got, err = decide.FoldShards("a", []int64{1, 2}, 3); err != nil || !slices.Equal(got, []int64{1, 2, 0}) {
		t.Errorf("FoldShards growing = %v, %v; want [1 2 0]", got, err)
	}
	if _, err = decide.FoldShards("a", []int64{math.MaxInt64, 0, 1}, 2); shardcounter.ErrorCode(err) != shardcounter.EOUTOFRANGE {
		t.Errorf("FoldShards past int64: %v, want out_of_range", err)
	}
}
