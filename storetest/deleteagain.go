package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// RunDeleteMadeAgain checks that a delete's sweep, after its first
// commit, leaves the member and request id of a counter made again under
// the id in between: its member set stays that of its shards (a member
// added again is not counted again) and its request id is recorded (a
// write under it again is a duplicate). For a store that deletes a
// counter in a commit and sweeps its records after (Firestore,
// Datastore): setHook sets the function the delete runs between the two
// (nil: none), and ownLeft lists the member and request-id records left
// under a counter, batch markers left out.
func RunDeleteMadeAgain(t *testing.T, s shardcounter.CounterStore, setHook func(func(id string)), ownLeft func(ctx context.Context, id string) (members, requests []string, err error)) {
	ctx := t.Context()
	id := prefix(t) + "made-again"
	spec := shardcounter.Spec{Shards: 4, Kind: shardcounter.KindDistinct}
	apply := func(inc shardcounter.Increment) shardcounter.Outcome {
		t.Helper()
		out, err := s.Apply(ctx, []shardcounter.Increment{inc})
		if err != nil || out[0].Err != nil {
			t.Fatalf("Apply(%+v): %v, %+v", inc, err, out)
		}
		return out[0]
	}
	if _, err := s.CreateCounter(ctx, id, spec); err != nil {
		t.Fatal(err)
	}
	apply(shardcounter.Increment{Counter: id, Member: "old", Delta: 1, RequestID: "r-old"})
	made := false
	setHook(func(got string) {
		if got != id || made {
			return
		}
		made = true
		if _, err := s.CreateCounter(ctx, id, spec); err != nil {
			t.Error(err)
			return
		}
		if o, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Member: "new", Delta: 1, RequestID: "r-new"}}); err != nil || o[0].Err != nil || o[0].Duplicate || o[0].Unchanged {
			t.Errorf("the add to the counter made again: %v, %+v", err, o)
		}
	})
	err := s.DeleteCounter(ctx, id)
	setHook(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !made {
		t.Fatal("the counter was not made again between the delete's commit and its sweep")
	}
	members, reqs, err := ownLeft(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(members, reqs) != "[new] [r-new]" {
		t.Errorf("after the delete: members %q, request ids %q; want the deleted counter's gone, the new one's kept", members, reqs)
	}
	if ok, err := s.IsMember(ctx, id, "new"); err != nil || !ok {
		t.Errorf("IsMember(new) = %v, %v after the delete's sweep, want true", ok, err)
	}
	if o := apply(shardcounter.Increment{Counter: id, Member: "new", Delta: 1}); !o.Unchanged {
		t.Errorf("adding new again: %+v, want Unchanged", o)
	}
	if o := apply(shardcounter.Increment{Counter: id, Member: "other", Delta: 1, RequestID: "r-new"}); !o.Duplicate {
		t.Errorf("a write under r-new again: %+v, want Duplicate", o)
	}
	if ok, err := s.IsMember(ctx, id, "old"); err != nil || ok {
		t.Errorf("IsMember(old) = %v, %v, want false: a member of the deleted counter", ok, err)
	}
	if r, err := s.ReadCounter(ctx, id); err != nil || r.Value != 1 {
		t.Errorf("ReadCounter = %+v, %v, want value 1", r, err)
	}
}
