package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// RunCommitSplit checks a store that splits a batch whose commit would
// pass its limit between counters (Firestore, Datastore), its limit
// lowered to limit bytes. commits returns how many commits the store has
// sent and the largest's size in bytes, as its client sent them.
//
// A batch creating 50 counters, with request ids, a transaction over
// three of them and an item conditional on another's, goes out in several
// commits, none past the limit, and every counter ends exact; sent again,
// every item is a duplicate. A transaction too large for one commit is
// refused whole, each item with the one error, none of its counters made,
// while the rest of its batch applies.
func RunCommitSplit(t *testing.T, s shardcounter.CounterStore, limit int, commits func() (n, most int64)) {
	ctx := context.Background()
	id := func(i int) string { return fmt.Sprintf("%ssplit-%02d", prefix(t), i) }
	spec := &shardcounter.Spec{Shards: 4}
	var batch []shardcounter.Increment
	for i := range 50 {
		inc := shardcounter.Increment{Counter: id(i), Delta: int64(i + 1), Pick: uint64(i), Create: spec, RequestID: "r"}
		if i >= 10 && i < 13 {
			inc.Txn = 1
		}
		batch = append(batch, inc)
	}
	// Conditional on the first item: it goes where that one goes.
	batch = append(batch, shardcounter.Increment{Counter: id(50), Delta: 51, Create: spec, If: 1})
	before, _ := commits()
	out, err := s.Apply(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil || o.Duplicate || o.Skipped {
			t.Errorf("item %d: %+v", i, o)
		}
	}
	n, most := commits()
	if n-before < 3 || most > int64(limit) {
		t.Errorf("%d commits, the largest %d bytes: want several, none past %d", n-before, most, limit)
	}
	t.Logf("51 counters in %d commits, the largest %d bytes (limit %d)", n-before, most, limit)
	for i := range 51 {
		if got := MustRead(t, s, id(i)); got != int64(i+1) {
			t.Errorf("%s: %d, want %d", id(i), got, i+1)
		}
	}
	out, err = s.Apply(ctx, batch[:50])
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil || !o.Duplicate {
			t.Errorf("sent again, item %d: %+v, want a duplicate", i, o)
		}
	}
	for i := range 50 {
		if got := MustRead(t, s, id(i)); got != int64(i+1) {
			t.Errorf("sent again, %s: %d, want %d", id(i), got, i+1)
		}
	}

	// A transaction of 40 counters does not fit; the item beside it does.
	var txn []shardcounter.Increment
	for i := range 40 {
		txn = append(txn, shardcounter.Increment{Counter: fmt.Sprintf("%stxn-%02d", prefix(t), i), Delta: 1, Create: spec, RequestID: "r", Txn: 7})
	}
	txn = append(txn, shardcounter.Increment{Counter: id(0), Delta: 100})
	before, _ = commits()
	out, err = s.Apply(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	first := out[0].Err
	if shardcounter.ErrorCode(first) != shardcounter.EINVALID || !strings.Contains(first.Error(), "smaller transactions") {
		t.Errorf("a transaction past the limit: %v, want invalid_argument asking for smaller transactions", first)
	}
	for i, o := range out[:40] {
		if o.Err == nil || o.Err.Error() != first.Error() {
			t.Errorf("transaction item %d: %+v, want %v", i, o, first)
		}
		if _, err := s.GetCounter(ctx, txn[i].Counter); !errors.Is(err, shardcounter.ErrNotFound) {
			t.Errorf("%s of the refused transaction: %v, want not found", txn[i].Counter, err)
		}
	}
	if o := out[40]; o.Err != nil {
		t.Errorf("the item beside the transaction: %+v", o)
	}
	if got := MustRead(t, s, id(0)); got != 101 {
		t.Errorf("%s: %d, want 101", id(0), got)
	}
	if n, _ := commits(); n-before != 1 {
		t.Errorf("%d commits for the refused transaction and one item, want 1", n-before)
	}
}

// RunEngineTxnSplit checks, through an engine over s (a store that splits
// a batch past its limit, lowered to limit bytes), that a RESP MULTI's
// writes (a run joined by Write.JoinNext) are one transaction to the
// store: 40 new counters joined so, too large for one commit, with a
// deadline change (EXPIRE) of an existing counter, are refused whole,
// each write with the one invalid_argument error, none of the counters
// made, no deadline set and no name deleted by a deadline already past
// (EXPIRE k 0), while the write queued beside them applies.
// Folded with the batch's other writes instead (a store that is no
// shardcounter.TxnApplier), they would be split between commits and
// applied in parts; and a deadline change whose records are not marked
// with the transaction would commit beside it.
func RunEngineTxnSplit(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	e, err := engine.New(s, engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	beside, expiring, kept := prefix(t)+"beside", prefix(t)+"expiring", prefix(t)+"kept"
	for _, n := range []string{expiring, kept} {
		if _, err := e.WriteCounter(ctx, shardcounter.Write{Counter: n, Delta: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var ws []shardcounter.Write
	for i := range 40 {
		ws = append(ws, shardcounter.Write{Counter: fmt.Sprintf("%smulti-%02d", prefix(t), i), Delta: 1, RequestID: fmt.Sprintf("r-%d", i), JoinNext: true})
	}
	at := time.Now().Add(time.Hour).UnixMilli()
	ws = append(ws, shardcounter.Write{Counter: expiring, Expire: &shardcounter.ExpireChange{At: at}, JoinNext: true})
	ws = append(ws, shardcounter.Write{Counter: kept, Expire: &shardcounter.ExpireChange{At: 1}}) // EXPIRE kept 0
	ws = append(ws, shardcounter.Write{Counter: beside, Delta: 5})
	res, err := e.WriteBatch(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	first := res[0].Error
	if first == nil {
		t.Fatalf("a MULTI past the limit: %+v, want it refused", res[0])
	}
	if shardcounter.ErrorCode(first) != shardcounter.EINVALID || !strings.Contains(first.Error(), "smaller transactions") {
		t.Errorf("a MULTI past the limit: %v, want invalid_argument asking for smaller transactions", first)
	}
	for i, r := range res[:40] {
		if r.Error == nil || r.Error.Error() != first.Error() {
			t.Errorf("MULTI write %d: %+v, want %v", i, r, first)
		}
		if _, err := s.GetCounter(ctx, ws[i].Counter); !errors.Is(err, shardcounter.ErrNotFound) {
			t.Errorf("%s of the refused MULTI: %v, want not found", ws[i].Counter, err)
		}
	}
	if r := res[40]; r.Error == nil || r.Error.Error() != first.Error() || r.Applied {
		t.Errorf("the MULTI's EXPIRE: %+v, want %v", r, first)
	}
	if ttl, err := e.CounterTTL(ctx, expiring); err != nil || !ttl.Exists || ttl.ExpiresAt != nil {
		t.Errorf("CounterTTL(%q) after the refused MULTI: %+v, %v; want no deadline", expiring, ttl, err)
	}
	if r := res[41]; r.Error == nil || r.Error.Error() != first.Error() || r.Applied {
		t.Errorf("the MULTI's EXPIRE of %s in the past: %+v, want %v", kept, r, first)
	}
	if got := MustRead(t, s, kept); got != 1 {
		t.Errorf("%s after the refused MULTI's EXPIRE in the past: %d, want it left at 1", kept, got)
	}
	if r := res[42]; r.Error != nil {
		t.Errorf("the write beside the MULTI: %+v", r)
	}
	if got := MustRead(t, s, beside); got != 5 {
		t.Errorf("%s: %d, want 5", beside, got)
	}
}
