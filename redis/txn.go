package redis

import (
	"context"
	"errors"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/shard"
)

// Transactions. The increments of one Increment.Txn (a RESP MULTI/EXEC)
// apply all or none, in one atomic step: one txnScript (scripts.go) on one
// master. On one server every shard is there. On a cluster a counter's
// shards lie in slots spread over the masters (keys.slot), so the store
// looks for a master that holds a shard of every counter of the
// transaction and writes each counter there:
//
//   - An item pinned to its shard keeps it: a member of a distinct counter
//     (shard ForMember mod n, where its presence is kept), an item with a
//     request id (shard PickFor mod n, the one place where a retry looks for
//     it: choosing another shard for it inside a transaction would let a
//     retry sent without the transaction, or after the masters changed,
//     count it twice), and any item of a bounded counter (all its shards
//     share one slot). Such an item allows only the master of its shard.
//   - Any other item may go to any shard of its counter, and allows every
//     master that holds one; the store takes, on the master chosen, the
//     shard its pick selects among the counter's shards there.
//
// The master chosen is one that every counter allows, preferring the
// master of the first item's own shard, so that transactions spread over
// the masters as single writes do. When no master is allowed by all, the
// transaction is refused, every item of it with a CROSSSLOT error
// (shardcounter.CrossSlot), and nothing of it is applied. A hash field is
// a counter of its own (package resp/server), so the rule is the same for
// HINCRBY.
//
// Retry safety holds as for single writes: the script records each
// request id on the id's own shard, in the same step as its delta, and a
// transaction that a lost reply leaves unsettled is settled by its marker
// (marker.go), as a slot group is.

// TxnUnits reports that Apply applies each transaction's increments in one
// step of their own (shardcounter.TxnApplier).
func (s *CounterStore) TxnUnits() bool { return true }

// TxnScripted reports that a transaction's step is a script carrying its
// deltas and members only (shardcounter.TxnScripter): a take cannot join
// it, and its deadline changes are committed after it.
func (s *CounterStore) TxnScripted() bool { return true }

// pinned reports whether an item must stay on the shard pickOf gave it.
func pinned(inc shardcounter.Increment, l *layout) bool {
	return inc.Member != "" || inc.RequestID != "" || l.keys.oneSlot
}

// placeTxns gives the items of each transaction of the attempt shards on
// one master (see above), and refuses the transactions that have none:
// their items leave a.items with their error in a.out.
func (a *attempt) placeTxns(ctx context.Context) {
	if a.s.cluster == nil {
		return
	}
	units := make(map[uint64][]int) // txn -> its items, as indexes into a.items
	var order []uint64
	for j, it := range a.items {
		if t := a.incs[it.i].Txn; t != 0 {
			if units[t] == nil {
				order = append(order, t)
			}
			units[t] = append(units[t], j)
		}
	}
	if len(order) == 0 {
		return
	}
	masters := make(map[int]*goredis.Client) // by slot; nil: no master found
	masterOf := func(slot int) *goredis.Client {
		m, ok := masters[slot]
		if !ok {
			var err error
			if m, err = a.s.cluster.MasterForKey(ctx, "{"+slotTags()[slot]+"}"); err != nil {
				a.s.refresh(ctx, err)
				m = nil
			}
			masters[slot] = m
		}
		return m
	}
	refused := make(map[int]bool)
	for _, t := range order {
		js := units[t]
		if err := a.placeTxn(js, masterOf); err != nil {
			for _, j := range js {
				a.out[a.items[j].i] = shardcounter.Outcome{Err: err}
				refused[j] = true
			}
		}
	}
	if len(refused) == 0 {
		return
	}
	keep := a.items[:0]
	for j, it := range a.items {
		if !refused[j] {
			keep = append(keep, it)
		}
	}
	a.items = keep
}

// placeTxn places the items js of one transaction on a master that every
// counter of it allows, or returns the error that refuses them all.
func (a *attempt) placeTxn(js []int, masterOf func(slot int) *goredis.Client) error {
	var allowed map[*goredis.Client]bool // masters every counter so far allows; nil: all
	unserved := false                    // a slot of the transaction's has no master
	seen := make(map[*layout]bool)
	for _, j := range js {
		l := a.items[j].l
		if seen[l] {
			continue
		}
		seen[l] = true
		ms := make(map[*goredis.Client]bool)
		var pin *goredis.Client
		pins := 0
		for _, k := range js {
			if it := a.items[k]; it.l == l && pinned(a.incs[it.i], l) {
				m := masterOf(l.keys.slot(it.shard))
				if pins > 0 && m != pin {
					m = nil // two pinned shards on two masters
				}
				pin = m
				pins++
			}
		}
		switch {
		case pins > 0 && pin != nil:
			ms[pin] = true
		case pins > 0:
			unserved = unserved || !a.pinsServed(js, l, masterOf)
		default:
			for i := range l.n {
				if m := masterOf(l.keys.slot(i)); m != nil {
					ms[m] = true
				} else {
					unserved = true
				}
			}
		}
		if allowed != nil {
			for m := range allowed {
				if !ms[m] {
					delete(allowed, m)
				}
			}
		} else {
			allowed = ms
		}
	}
	first := a.items[js[0]]
	var chosen *goredis.Client
	for k := range first.l.n { // from the first item's own shard on
		if m := masterOf(first.l.keys.slot((first.shard + k) % first.l.n)); m != nil && allowed[m] {
			chosen = m
			break
		}
	}
	switch {
	case chosen == nil && unserved:
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: a slot of the transaction's counters has no master (a master is down or failing over); nothing of it was applied, try again")
	case chosen == nil:
		return shardcounter.CrossSlot("Keys in request don't hash to the same slot: no master of the Redis Cluster holds a shard of every counter of the transaction (%s); nothing of it was applied. Send these writes without MULTI, or in transactions over fewer counters", a.txnCounters(js))
	}
	for _, j := range js {
		it := &a.items[j]
		if pinned(a.incs[it.i], it.l) {
			continue
		}
		var on []int // the counter's shards on the chosen master
		for i := range it.l.n {
			if masterOf(it.l.keys.slot(i)) == chosen {
				on = append(on, i)
			}
		}
		it.shard = on[shard.Of(a.incs[it.i].Pick, len(on))]
	}
	return nil
}

// pinsServed reports whether every pinned item of counter l in js has a
// master: false tells a transaction refused for want of a master apart
// from one whose pinned shards lie on two masters.
func (a *attempt) pinsServed(js []int, l *layout, masterOf func(slot int) *goredis.Client) bool {
	for _, k := range js {
		if it := a.items[k]; it.l == l && pinned(a.incs[it.i], l) && masterOf(l.keys.slot(it.shard)) == nil {
			return false
		}
	}
	return true
}

// txnCounters names the counters of a transaction's items, for an error.
func (a *attempt) txnCounters(js []int) string {
	var ids []string
	seen := make(map[string]bool)
	for _, j := range js {
		if id := a.items[j].l.id; !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) > 8 {
		ids = append(ids[:8], "...")
	}
	return strings.Join(ids, ", ")
}

// txnCall turns a transaction's group's keys, its marker last, and
// arguments into txnScript's: the marker the one key, the others in the
// arguments (see txnScript).
func txnCall(keys []string, args []any) ([]string, []any) {
	items := keys[:len(keys)-1]
	out := make([]any, 0, len(args)+1+len(items))
	out = append(out, args[0], args[1], len(items))
	for _, k := range items {
		out = append(out, k)
	}
	return []string{keys[len(keys)-1]}, append(out, args[2:]...)
}

// txnNotRun reports whether a transaction's script failed on a key its
// node does not serve (the slot moved, or the cluster is down there). Its
// first pass reads every shard before writing anything (txnScript), so it
// changed nothing and may be tried again once the slots are reloaded.
func txnNotRun(err error) bool {
	var re goredis.Error
	if err == nil || !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.Contains(msg, "non local key") || strings.Contains(msg, "cluster is down")
}

// txnScript is addScript for the items of one transaction
// (Increment.Txn), which apply all or none: KEYS[1] is the marker and
// ARGV[1] and ARGV[2] are addScript's; ARGV[3] is the number of the
// items' keys, which follow it, and then come the items' arguments. The
// keys are not declared because on a Redis Cluster they lie in several
// slots of one master, which a script may touch when its flags allow
// cross-slot keys (Redis 7) and only then; each is still checked to be
// served by the node. A first pass (reserve) checks every item's epoch
// and spends every sum item's room before any item applies: when one is
// stale or short of room, nothing is applied, that item answers so and
// every other answers deferred, and the attempt tries them all again.
var txnScript = goredis.NewScript(`#!lua flags=allow-cross-slot-keys
` + luaLess + `
local K, A, atomic = {}, {ARGV[1], ARGV[2]}, true
local nik = tonumber(ARGV[3])
for i = 1, nik do K[i] = ARGV[3 + i] end
for i = 4 + nik, #ARGV do A[#A + 1] = ARGV[i] end
K[#K + 1] = KEYS[1]` + addBody)
