package firestore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/sketch"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestApproxTwoProcesses adds members to one approx shard from two
// stores on one database, as two processes would: their in-process
// locks do not see each other, so only the store's concurrency control
// keeps one writer's read-modify-write of the sketch from dropping the
// other's registers. Every member must count: the shard's sketch must
// estimate what one sketch of all the members does (a union of registers
// does not depend on the order of the adds).
func TestApproxTwoProcesses(t *testing.T) {
	project := firestoretest.Project(t)
	a := mustOpenProject(t, project, firestore.Options{})
	b := mustOpenProject(t, project, firestore.Options{})
	storetest.MustCreateApprox(t, a, "uniques", 1)
	const perStore, batch = 600, 20
	var wg sync.WaitGroup
	for w, s := range []*firestore.CounterStore{a, b} {
		wg.Go(func() {
			for i := 0; i < perStore; i += batch {
				var incs []shardcounter.Increment
				for j := i; j < i+batch; j++ {
					incs = append(incs, shardcounter.Increment{Counter: "uniques", Member: fmt.Sprintf("w%d-%d", w, j), Delta: 1})
				}
				out, err := s.Apply(context.Background(), incs)
				if err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				for _, o := range out {
					if o.Err != nil || o.Unchanged {
						t.Errorf("a new member: outcome %+v", o)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var all []string
	for w := range 2 {
		for j := range perStore {
			all = append(all, fmt.Sprintf("w%d-%d", w, j))
		}
	}
	one, _, err := sketch.Apply(nil, all, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := sketch.Count([][]byte{one})
	for _, s := range []*firestore.CounterStore{a, b} {
		if v := storetest.CheckApprox(t, s, "uniques", 2*perStore); v != want {
			t.Fatalf("the counter estimates %d, one sketch of its %d members %d: registers were lost", v, len(all), want)
		}
	}
}
