package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// DeleteSeam is what RunDeleteMadeAgain needs of a store that deletes a
// counter in a commit and sweeps its other records after (Firestore,
// Datastore).
type DeleteSeam struct {
	Store shardcounter.CounterStore
	Clock *Clock // the store's clock (its Options.Now)
	// SetHook sets the function DeleteCounter runs between its commit and
	// its sweep (nil: none). An error it returns ends the delete there,
	// with that error, as a failure after the commit would.
	SetHook func(func(id string) error)
	// Left lists the records under a counter id.
	Left func(ctx context.Context, id string) (Left, error)
}

// Left is what is left under a counter id: the names of its member and
// request-id records and of its batch markers, and its buckets' starts.
type Left struct {
	Members, Requests, Markers []string
	Buckets                    []time.Time
}

// RunDeleteMadeAgain checks that a delete's sweep, after its first
// commit, leaves the records of a counter made again under the id in
// between: its members (its member set stays that of its shards), its
// request ids (a write under one again is a duplicate), its window
// buckets (its windowed reads keep its writes) and its batch markers
// (a batch whose commit had no clear answer settles on its marker);
// and that the buckets a delete that failed after its commit leaves are
// not read, nor added to, as the buckets of a counter made again under
// the id.
func RunDeleteMadeAgain(t *testing.T, seam DeleteSeam) {
	t.Run("Members", func(t *testing.T) { deleteAgainMembers(t, seam) })
	t.Run("Window", func(t *testing.T) { deleteAgainWindow(t, seam, false) })
	t.Run("WindowAfterFailedDelete", func(t *testing.T) { deleteAgainWindow(t, seam, true) })
}

// madeAgain sets the hook that, on the delete of id, advances the clock
// (so the counter made again has another created_at) and runs again,
// and returns whether it ran and the batch markers that its writes
// left under id.
func madeAgain(t *testing.T, seam DeleteSeam, id string, again func() error) (ran *bool, markers *[]string) {
	ran, markers = new(bool), new([]string)
	seam.SetHook(func(got string) error {
		if got != id || *ran {
			return nil
		}
		*ran = true
		before, err := seam.Left(t.Context(), id)
		if err != nil {
			t.Error(err)
			return nil
		}
		seam.Clock.Advance(10 * time.Second)
		if err := again(); err != nil {
			return err
		}
		after, err := seam.Left(t.Context(), id)
		if err != nil {
			t.Error(err)
			return nil
		}
		for _, m := range after.Markers {
			if !slices.Contains(before.Markers, m) {
				*markers = append(*markers, m)
			}
		}
		if len(*markers) == 0 {
			t.Error("the writes to the counter made again left no batch marker")
		}
		return nil
	})
	t.Cleanup(func() { seam.SetHook(nil) })
	return ran, markers
}

// applyAlone applies inc alone and fails the test unless it applied.
func applyAlone(t *testing.T, s shardcounter.CounterStore, inc shardcounter.Increment) shardcounter.Outcome {
	t.Helper()
	out, err := s.Apply(t.Context(), []shardcounter.Increment{inc})
	if err != nil || out[0].Err != nil {
		t.Fatalf("Apply(%+v): %v, %+v", inc, err, out)
	}
	return out[0]
}

// leftAfter lists what the delete of id left, and fails the test unless
// the markers the counter made again wrote are among it.
func leftAfter(t *testing.T, seam DeleteSeam, id string, markers []string) Left {
	t.Helper()
	left, err := seam.Left(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range markers {
		if !slices.Contains(left.Markers, m) {
			t.Errorf("the delete's sweep took batch marker %s of the counter made again: a batch of it whose commit had no clear answer would find none and commit again", m)
		}
	}
	return left
}

func deleteAgainMembers(t *testing.T, seam DeleteSeam) {
	ctx, s := t.Context(), seam.Store
	id := prefix(t) + "made-again"
	spec := shardcounter.Spec{Shards: 4, Kind: shardcounter.KindDistinct}
	if _, err := s.CreateCounter(ctx, id, spec); err != nil {
		t.Fatal(err)
	}
	applyAlone(t, s, shardcounter.Increment{Counter: id, Member: "old", Delta: 1, RequestID: "r-old"})
	made, markers := madeAgain(t, seam, id, func() error {
		if _, err := s.CreateCounter(ctx, id, spec); err != nil {
			t.Error(err)
			return nil
		}
		if o, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Member: "new", Delta: 1, RequestID: "r-new"}}); err != nil || o[0].Err != nil || o[0].Duplicate || o[0].Unchanged {
			t.Errorf("the add to the counter made again: %v, %+v", err, o)
		}
		return nil
	})
	if err := s.DeleteCounter(ctx, id); err != nil {
		t.Fatal(err)
	}
	if !*made {
		t.Fatal("the counter was not made again between the delete's commit and its sweep")
	}
	left := leftAfter(t, seam, id, *markers)
	if fmt.Sprint(left.Members, left.Requests) != "[new] [r-new]" {
		t.Errorf("after the delete: members %q, request ids %q; want the deleted counter's gone, the new one's kept", left.Members, left.Requests)
	}
	if ok, err := s.IsMember(ctx, id, "new"); err != nil || !ok {
		t.Errorf("IsMember(new) = %v, %v after the delete's sweep, want true", ok, err)
	}
	if o := applyAlone(t, s, shardcounter.Increment{Counter: id, Member: "new", Delta: 1}); !o.Unchanged {
		t.Errorf("adding new again: %+v, want Unchanged", o)
	}
	if o := applyAlone(t, s, shardcounter.Increment{Counter: id, Member: "other", Delta: 1, RequestID: "r-new"}); !o.Duplicate {
		t.Errorf("a write under r-new again: %+v, want Duplicate", o)
	}
	if ok, err := s.IsMember(ctx, id, "old"); err != nil || ok {
		t.Errorf("IsMember(old) = %v, %v, want false: a member of the deleted counter", ok, err)
	}
	if r, err := s.ReadCounter(ctx, id); err != nil || r.Value != 1 {
		t.Errorf("ReadCounter = %+v, %v, want value 1", r, err)
	}
}

// deleteAgainWindow deletes a windowed counter with writes in two
// buckets, b0 and b1, and makes it again under the id with a write in
// b1: between the delete's commit and its sweep, or (failed) after a
// delete that stopped there. Either way the new counter's b1 holds its
// write alone, and its windowed reads see b1 alone.
func deleteAgainWindow(t *testing.T, seam DeleteSeam, failed bool) {
	ctx, s, clk := t.Context(), seam.Store, seam.Clock
	id := prefix(t) + "window"
	spec := shardcounter.Spec{Shards: 2, Window: window(time.Minute, time.Hour)}
	b0 := spec.Window.BucketOf(clk.Now()).Add(time.Minute)
	clk.Set(b0)
	if _, err := s.CreateCounter(ctx, id, spec); err != nil {
		t.Fatal(err)
	}
	applyAlone(t, s, shardcounter.Increment{Counter: id, Delta: 5, RequestID: "r-old"})
	clk.Advance(time.Minute)
	b1 := b0.Add(time.Minute)
	applyAlone(t, s, shardcounter.Increment{Counter: id, Delta: 7})
	again := func() error {
		if _, err := s.CreateCounter(ctx, id, spec); err != nil {
			t.Error(err)
			return nil
		}
		if o, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: 1, RequestID: "r-new"}}); err != nil || o[0].Err != nil || o[0].Duplicate {
			t.Errorf("the write to the counter made again: %v, %+v", err, o)
		}
		return nil
	}
	stop := errors.New("stopped before the sweep")
	made, markers := madeAgain(t, seam, id, func() error {
		if failed {
			return stop
		}
		return again()
	})
	err := s.DeleteCounter(ctx, id)
	switch {
	case !*made:
		t.Fatal("the delete did not reach its sweep")
	case failed && !errors.Is(err, stop):
		t.Fatalf("DeleteCounter = %v, want the hook's %v", err, stop)
	case !failed && err != nil:
		t.Fatal(err)
	}
	if failed {
		seam.SetHook(nil)
		clk.Advance(10 * time.Second)
		again()
		if t.Failed() {
			return
		}
	}
	left := leftAfter(t, seam, id, *markers)
	if !failed && (!slices.ContainsFunc(left.Buckets, b1.Equal) || slices.ContainsFunc(left.Buckets, b0.Equal)) {
		t.Errorf("after the delete: buckets %v; want the deleted counter's %v swept and the new one's %v kept", left.Buckets, b0, b1)
	}
	if r, err := s.ReadWindow(ctx, id, b0.Add(-time.Hour), b1.Add(time.Hour)); err != nil || r.Value != 1 {
		t.Errorf("ReadWindow = %+v, %v, want value 1: the counter made again's write alone", r, err)
	}
	want := []shardcounter.Bucket{{Start: b1, Value: 1}}
	if bs, err := s.ReadSeries(ctx, id, b0.Add(-time.Hour), b1.Add(time.Hour)); err != nil || fmt.Sprint(bs) != fmt.Sprint(want) {
		t.Errorf("ReadSeries = %v, %v, want %v", bs, err, want)
	}
}
