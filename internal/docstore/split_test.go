package docstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
)

// fakeStore applies batches by a size of 1,000 bytes a counter, as a
// store's estimate would measure it, and records the commits.
type fakeStore struct {
	commits [][]string // the counters of each commit
	values  map[string]int64
}

func (f *fakeStore) apply(_ context.Context, incs []shardcounter.Increment, limit int) ([]shardcounter.Outcome, error) {
	z := NewSizes()
	var ids []string
	for _, inc := range incs {
		z.For(inc.Counter)
		if !slices.Contains(ids, inc.Counter) {
			ids = append(ids, inc.Counter)
			z.add(1000)
		}
	}
	z.For("")
	z.add(200) // the marker
	if err := z.Check("fake", limit); err != nil {
		return nil, err
	}
	out := make([]shardcounter.Outcome, len(incs))
	for i, inc := range incs {
		if inc.If != 0 && (inc.If-1 >= i || incs[inc.If-1].Counter == "") {
			out[i].Err = errors.New("bad condition")
			continue
		}
		f.values[inc.Counter] += inc.Delta
	}
	f.commits = append(f.commits, ids)
	return out, nil
}

func TestSplit(t *testing.T) {
	f := &fakeStore{values: map[string]int64{}}
	incs := []shardcounter.Increment{
		{Counter: "a", Delta: 1},
		{Counter: "b", Delta: 2, Txn: 5},
		{Counter: "c", Delta: 3},
		{Counter: "d", Delta: 4, Txn: 5},
		{Counter: "e", Delta: 5, If: 3}, // with c
		{Counter: "a", Delta: 6},
		{Counter: "f", Delta: 7},
	}
	// Room for three counters a commit (and the markers).
	limit := 3*1000 + CommitBytes + 200 + 4*shardcounter.MaxIDLen
	out, err := Split(context.Background(), "fake", incs, limit, f.apply)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil {
			t.Errorf("item %d: %v", i, o.Err)
		}
	}
	want := [][]string{{"a", "b", "d"}, {"c", "e", "f"}}
	if !slices.EqualFunc(f.commits, want, slices.Equal) {
		t.Errorf("commits %v, want %v", f.commits, want)
	}
	if f.values["a"] != 7 || f.values["e"] != 5 {
		t.Errorf("values %v", f.values)
	}
}

// TestSplitRefusesTxn checks that a transaction too large for one commit
// is refused whole, and the rest of the batch applied.
func TestSplitRefusesTxn(t *testing.T) {
	f := &fakeStore{values: map[string]int64{}}
	incs := []shardcounter.Increment{
		{Counter: "a", Delta: 1, Txn: 1},
		{Counter: "x", Delta: 2},
		{Counter: "b", Delta: 3, Txn: 1},
		{Counter: "c", Delta: 4, Txn: 1},
	}
	limit := 2*1000 + CommitBytes + 200 + 4*shardcounter.MaxIDLen
	out, err := Split(context.Background(), "fake", incs, limit, f.apply)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2, 3} {
		if e := out[i].Err; shardcounter.ErrorCode(e) != shardcounter.EINVALID || !strings.Contains(e.Error(), "smaller transactions") || e != out[0].Err {
			t.Errorf("item %d: %v, want the transaction's refusal", i, e)
		}
	}
	if out[1].Err != nil || f.values["x"] != 2 || len(f.values) != 1 {
		t.Errorf("item 1: %v; values %v, want x alone applied", out[1].Err, f.values)
	}
}

func TestSubBatch(t *testing.T) {
	incs := []shardcounter.Increment{{Counter: "a"}, {Counter: "b"}, {Counter: "c", If: 1}, {Counter: "d", If: 4}}
	sub := subBatch(incs, []int{0, 2, 3})
	if sub[1].If != 1 || sub[2].If != 3 {
		t.Errorf("conditions %d, %d: want 1 and 3 (not before it: invalid)", sub[1].If, sub[2].If)
	}
}
