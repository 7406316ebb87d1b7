package docstore

import (
	"slices"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// TestWanted checks what a batch reads beside its shards: each request id
// and member once, none of a counter the store does not read, and no
// member of a counter guessed approx (by its spec, else by the item's
// Create).
func TestWanted(t *testing.T) {
	approx := &shardcounter.Spec{Shards: 1, Kind: shardcounter.KindApprox}
	distinct := &shardcounter.Spec{Shards: 1, Kind: shardcounter.KindDistinct}
	incs := []shardcounter.Increment{
		{Counter: "a", Delta: 1, RequestID: "r1"},
		{Counter: "a", Delta: 1, RequestID: "r1"},
		{Counter: "a", Member: "m", Delta: 1},
		{Counter: "a", Member: "m", Delta: 1},
		{Counter: "a", Member: "bad\x00", Delta: 1},
		{Counter: "gone", Delta: 1, RequestID: "r2"},
		{Counter: "ap", Member: "m", Delta: 1},
		{Counter: "new", Member: "m", Delta: 1, Create: approx},
		{Counter: "new2", Member: "m", Delta: 1, Create: distinct},
	}
	specs := map[string]*shardcounter.Spec{"a": distinct, "ap": approx, "new": nil, "new2": nil}
	reqs, members := Wanted(incs, func(id string) (*shardcounter.Spec, bool) {
		spec, ok := specs[id]
		return spec, ok
	})
	if want := []Key{{"a", "r1"}}; !slices.Equal(reqs, want) {
		t.Errorf("request ids %v, want %v", reqs, want)
	}
	if want := []Key{{"a", "m"}, {"new2", "m"}}; !slices.Equal(members, want) {
		t.Errorf("members %v, want %v", members, want)
	}
}
