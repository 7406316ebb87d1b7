package docstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
)

// CommitLimit is the most one commit may carry: Firestore's and
// Datastore's 10 MiB a transaction and an API request. A batch whose
// writes would pass it is split between counters (Split).
const CommitLimit = 10 << 20

// Sizes estimates the size of a commit, as a store builds its writes, and
// how much of it each counter's writes take. The services count a
// request's bytes (the transaction and API request limits) on the wire,
// where every write carries its document's full name, every field its
// name (twice when an update mask lists it) and value, and framing around
// both; the storage size rules (a name's UTF-8 bytes plus 1 for each path
// segment and field name, 8 for a number or a timestamp, a string's or
// blob's bytes plus 1, 16 and 32 for a document's name and body) count
// less. So the estimate takes the wire's figures, rounded up: a write is
// its full name and WriteBytes, a field twice its name, its value's size
// (ValueBytes) and FieldBytes; a commit starts at CommitBytes. A
// commit the estimate keeps under the limit is under it.
type Sizes struct {
	total    int
	counters map[string]int
	cur      string
}

// The overheads Sizes counts (see there).
const (
	CommitBytes = 512 // the request: database, transaction, framing
	WriteBytes  = 64  // a write: framing, precondition, mask
	FieldBytes  = 8   // a field: framing of its name and value
)

// NewSizes returns the estimate of an empty commit.
func NewSizes() *Sizes { return &Sizes{total: CommitBytes, counters: map[string]int{}} }

// For makes the writes that follow count to counter ("" for the batch as
// a whole: its marker).
func (z *Sizes) For(counter string) { z.cur = counter }

// Write counts a write of the document (entity) of the full name given.
func (z *Sizes) Write(name string) { z.add(len(name) + WriteBytes) }

// Field counts a field of the last write.
func (z *Sizes) Field(name string, v any) { z.add(2*len(name) + ValueBytes(v) + FieldBytes) }

func (z *Sizes) add(n int) {
	z.total += n
	if z.cur != "" {
		z.counters[z.cur] += n
	}
}

// Total is the commit's estimated size.
func (z *Sizes) Total() int { return z.total }

// ValueBytes is a field value's size on the wire, rounded up: a number 10
// (a varint's most), a timestamp 24, a string or blob its bytes and 4, a
// map its fields, anything else (a transform, a key) 64.
func ValueBytes(v any) int {
	switch v := v.(type) {
	case nil, bool:
		return 2
	case int, int64, int32, uint64, float64:
		return 10
	case time.Time:
		return 24
	case string:
		return len(v) + 4
	case []byte:
		return len(v) + 4
	case map[string]any:
		n := 8
		for k, e := range v {
			n += len(k) + ValueBytes(e) + FieldBytes
		}
		return n
	}
	return 64
}

// TooLarge is the error of an attempt whose commit would pass the limit:
// nothing was sent, and Split sends the batch in parts.
type TooLarge struct {
	Store    string
	Limit    int
	Total    int
	Counters map[string]int // what each counter's writes take
}

func (e *TooLarge) Error() string {
	return fmt.Sprintf("%s: the batch's commit would take about %d bytes, past the %d a commit takes", e.Store, e.Total, e.Limit)
}

// IsTooLarge reports whether err is a *TooLarge.
func IsTooLarge(err error) bool {
	var big *TooLarge
	return errors.As(err, &big)
}

// Check returns a *TooLarge when the estimate passes limit (0 for none).
func (z *Sizes) Check(store string, limit int) error {
	if limit <= 0 || z.total <= limit {
		return nil
	}
	return &TooLarge{Store: store, Limit: limit, Total: z.total, Counters: z.counters}
}

// ApplyFunc applies a batch in one commit, refusing it with a *TooLarge
// when its commit would pass limit (0: it commits whatever the size).
type ApplyFunc func(ctx context.Context, incs []shardcounter.Increment, limit int) ([]shardcounter.Outcome, error)

// Split applies incs with apply in one commit when it fits under limit,
// and otherwise in parts, each a commit of its own (with its own marker,
// decided on its own reads, in the batch's order), split between
// counters: the items of one counter, of one transaction (Increment.Txn)
// and an item and the one it is conditional on (Increment.If) are always
// in one part. A part of one such group that passes the limit alone
// commits alone, what it is, and the service is the judge; one that holds
// a transaction is refused instead, every item of it, nothing applied:
// a transaction is one atomic step, which one commit is. After a split
// each item's outcome is its part's, and a part's failure is the error of
// each of its items.
func Split(ctx context.Context, store string, incs []shardcounter.Increment, limit int, apply ApplyFunc) ([]shardcounter.Outcome, error) {
	out, err := apply(ctx, incs, limit)
	var big *TooLarge
	if !errors.As(err, &big) {
		return out, err
	}
	out = make([]shardcounter.Outcome, len(incs))
	for _, p := range plan(incs, big, limit) {
		sub := subBatch(incs, p.items)
		var o []shardcounter.Outcome
		var err error
		switch {
		case p.refuse:
			err = shardcounter.Errorf(shardcounter.EINVALID, "%s: a transaction's writes (counters %s) would take about %d bytes, past the %d one commit takes; nothing of it was applied: send it as smaller transactions, or without one", store, p.names(incs), p.size, limit)
		case p.groups == 1 || len(sub) == len(incs): // nothing to split: it fits by its counters' sizes
			o, err = apply(ctx, sub, 0)
		default:
			o, err = Split(ctx, store, sub, limit, apply) // read again: it may need splitting further
		}
		for k, i := range p.items {
			if err != nil {
				out[i] = shardcounter.Outcome{Err: err}
			} else {
				out[i] = o[k]
			}
		}
	}
	return out, nil
}

// part is the items of one commit of a split batch.
type part struct {
	items  []int // indexes into the batch, in order
	groups int
	size   int
	refuse bool // one group, a transaction past the limit
}

// names lists the part's counters, the first three of them.
func (p part) names(incs []shardcounter.Increment) string {
	var ids []string
	for _, i := range p.items {
		if q := fmt.Sprintf("%q", incs[i].Counter); !slices.Contains(ids, q) {
			ids = append(ids, q)
		}
	}
	if len(ids) > 3 {
		return fmt.Sprintf("%s and %d more", strings.Join(ids[:3], ", "), len(ids)-3)
	}
	return strings.Join(ids, ", ")
}

// plan splits incs into parts of whole groups (see Split), each under
// limit by the sizes the attempt measured, in the order of the groups'
// first items.
func plan(incs []shardcounter.Increment, big *TooLarge, limit int) []part {
	// Union-find over the items: one counter's, one transaction's, and an
	// item with its condition's item are one group.
	parent := make([]int, len(incs))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	union := func(a, b int) {
		if a, b = find(a), find(b); a != b {
			parent[max(a, b)] = min(a, b) // the root is the group's first item
		}
	}
	byCounter := map[string]int{}
	byTxn := map[uint64]int{}
	for i, inc := range incs {
		if j, ok := byCounter[inc.Counter]; ok {
			union(i, j)
		} else {
			byCounter[inc.Counter] = i
		}
		if inc.Txn != 0 {
			if j, ok := byTxn[inc.Txn]; ok {
				union(i, j)
			} else {
				byTxn[inc.Txn] = i
			}
		}
		if inc.If > 0 && inc.If <= i {
			union(i, inc.If-1)
		}
	}
	type group struct {
		items []int
		size  int
		txn   bool
	}
	var order []int
	groups := map[int]*group{}
	for i, inc := range incs {
		r := find(i)
		g := groups[r]
		if g == nil {
			g = &group{}
			groups[r] = g
			order = append(order, r)
		}
		if g.txn = g.txn || inc.Txn != 0; byCounter[inc.Counter] == i {
			g.size += big.Counters[inc.Counter]
		}
		g.items = append(g.items, i)
	}
	// Each part has what the batch has beside its counters (its marker,
	// the request), and room for a marker's name under another counter.
	room := big.Total + 4*shardcounter.MaxIDLen // escaped, a name may grow
	for _, n := range big.Counters {
		room -= n
	}
	room = limit - room
	var parts []part
	var cur part
	flush := func() {
		if cur.groups > 0 {
			slices.Sort(cur.items)
			parts = append(parts, cur)
		}
		cur = part{}
	}
	for _, r := range order {
		g := groups[r]
		if g.size > room {
			flush()
			cur = part{items: g.items, groups: 1, size: g.size + CommitBytes, refuse: g.txn}
			flush()
			continue
		}
		if cur.size+g.size > room {
			flush()
		}
		cur.items = append(cur.items, g.items...)
		cur.groups++
		cur.size += g.size
	}
	flush()
	return parts
}

// subBatch returns the items of incs at idx, their conditions (If)
// renumbered to the sub-batch: a condition's item is always in it.
func subBatch(incs []shardcounter.Increment, idx []int) []shardcounter.Increment {
	at := make(map[int]int, len(idx))
	sub := make([]shardcounter.Increment, len(idx))
	for k, i := range idx {
		at[i] = k
		sub[k] = incs[i]
		if inc := incs[i]; inc.If != 0 {
			j, ok := at[inc.If-1]
			if !ok || inc.If-1 >= i {
				j = k // not before it, as it was not: invalid
			}
			sub[k].If = j + 1
		}
	}
	return sub
}
