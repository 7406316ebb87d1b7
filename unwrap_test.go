package shardcounter_test

import (
	"testing"

	"github.com/shardcounter/shardcounter"
)

// A chain of stores for As: only the methods As looks at are real; the
// embedded CounterStore is nil, and nothing calls it.
type (
	bareStore struct{ shardcounter.CounterStore }
	txnStore  struct{ shardcounter.CounterStore }
	// wrapper wraps a store and unwraps; hiding does not.
	wrapper struct{ shardcounter.CounterStore }
	hiding  struct{ shardcounter.CounterStore }
)

func (*txnStore) TxnUnits() bool                     { return true }
func (w *wrapper) Unwrap() shardcounter.CounterStore { return w.CounterStore }

// TestAs checks that As finds a capability on the store itself or down a
// chain of Unwrap calls, the nearest first, finds a store's own type the
// same way, and stops at a store that does not unwrap.
func TestAs(t *testing.T) {
	txn := &txnStore{}
	chain := &wrapper{&wrapper{txn}}
	if got, ok := shardcounter.As[shardcounter.TxnApplier](chain); !ok || got != txn {
		t.Fatalf("As[TxnApplier] through two wrappers = %v, %v; want the store beneath", got, ok)
	}
	if got, ok := shardcounter.As[*txnStore](chain); !ok || got != txn {
		t.Fatalf("As[*txnStore] = %v, %v; want the store beneath", got, ok)
	}
	if got, ok := shardcounter.As[*wrapper](chain); !ok || got != chain {
		t.Fatalf("As[*wrapper] = %v, %v; want the outermost", got, ok)
	}
	if _, ok := shardcounter.As[shardcounter.TxnApplier](&wrapper{&bareStore{}}); ok {
		t.Fatal("As found a capability no store of the chain has")
	}
	if _, ok := shardcounter.As[shardcounter.TxnApplier](&hiding{txn}); ok {
		t.Fatal("As looked beneath a store that does not unwrap")
	}
	if _, ok := shardcounter.As[shardcounter.TxnApplier](nil); ok {
		t.Fatal("As found a capability on a nil store")
	}
	if _, ok := shardcounter.As[shardcounter.TxnApplier](&wrapper{nil}); ok {
		t.Fatal("As found a capability beneath a wrapper of nothing")
	}
}
