package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
)

// Metadata fields of a counter (the hash at metaKey).
const (
	fieldID          = "id"
	fieldShards      = "n"
	fieldCreated     = "c"
	fieldIncarnation = "i"  // names the shard keys: random per CreateCounter
	fieldEpoch       = "e"  // layout epoch: bumped by every reshard
	fieldState       = "st" // "" normal, "reshard" (intent recorded), "delete"
	fieldTo          = "to" // the reshard intent's target shard count
	fieldHistory     = "h"  // earlier shard counts still inside the dedupe window
	fieldMax         = "mx" // the highest shard count used: keys to delete
	fieldNeedK       = "nk" // a rebalance's intent: the shard a write wants room on
	fieldNeedD       = "nd" // and the delta it wants to write
	fieldKind        = "k"  // "sum" or "distinct"; absent: sum
	fieldMin         = "lo" // the bound below, when there is one
	fieldMaxBound    = "hi" // the bound above, when there is one
	fieldBucket      = "wb" // a window's bucket width, in seconds
	fieldRetention   = "wr" // and its retention, in seconds
	fieldMemberGen   = "mg" // a distinct counter's member generation; absent: 1
)

const (
	stateReshard = "reshard"
	stateDelete  = "delete"
)

// maxHistory bounds how many earlier shard counts a counter remembers for
// request-id dedupe across reshards (see past).
const maxHistory = 32

// past is an earlier shard count of a counter and the Unix millisecond at
// which the last layout with it ended. A retried write with a request id
// may find its first try recorded on shard PickFor mod n of such a layout;
// it stays relevant until every id recorded under it has expired.
type past struct {
	n     int
	until int64
}

// layout is a counter's metadata as read from Redis: its shard count and
// the epoch its shards accept writes for. Writers cache it; a shard
// refuses a write carrying another epoch, which is how a stale cache is
// found out.
type layout struct {
	id      string
	keys    keys
	n       int
	epoch   int64
	created time.Time
	state   string
	to      int
	hist    []past
	max     int
	need    *need // the write a recorded rebalance was asked for
	unborn  bool  // a counter an attempt of Apply creates, not yet published

	spec      shardcounter.Spec // kind, bounds and window; Shards is n
	memberGen int64             // distinct counters: names the member sets (see keys.members)

	// frozen holds, after finishReshard's fence step, the old shards'
	// values while they were frozen (see fence), or nil; frozenX their
	// sketches (field x), for an approx counter's strong read.
	frozen  []int64
	frozenX [][]byte
}

func (l *layout) ep() string { return strconv.FormatInt(l.epoch, 10) }

func (l *layout) counter() *shardcounter.Counter {
	spec := l.spec
	spec.Shards = l.n
	if spec.Kind == "" {
		spec.Kind = shardcounter.KindSum
	}
	return &shardcounter.Counter{ID: l.id, Spec: spec, CreatedAt: l.created}
}

func (l *layout) distinct() bool { return l.spec.Kind == shardcounter.KindDistinct }

// approx reports whether the counter keeps a sketch per shard (field x).
func (l *layout) approx() bool { return l.spec.Kind == shardcounter.KindApprox }

// rooms reports whether the counter's shards keep allowances (see
// allowance.go): unbounded sum counters. A bounded counter's total is
// checked exactly in its bounds key; a distinct counter's is its members;
// an approx counter's shards keep sketches, not values.
func (l *layout) rooms() bool { return !l.distinct() && !l.approx() && !l.spec.Bounded() }

// parseLayout reads metadata fields; an empty map is a missing counter.
func (s *CounterStore) parseLayout(id string, m map[string]string) (*layout, error) {
	if len(m) == 0 {
		return nil, nil
	}
	l := &layout{id: id, state: m[fieldState]}
	var err error
	bad := func(field string, e error) error {
		return shardcounter.Errorf(shardcounter.EINTERNAL, "redis: counter %q has corrupt metadata field %q: %v", id, field, e)
	}
	if l.n, err = strconv.Atoi(m[fieldShards]); err != nil {
		return nil, bad(fieldShards, err)
	}
	if l.epoch, err = strconv.ParseInt(m[fieldEpoch], 10, 64); err != nil {
		return nil, bad(fieldEpoch, err)
	}
	if l.created, err = time.Parse(time.RFC3339Nano, m[fieldCreated]); err != nil {
		return nil, bad(fieldCreated, err)
	}
	if l.max, err = strconv.Atoi(m[fieldMax]); err != nil {
		return nil, bad(fieldMax, err)
	}
	if m[fieldIncarnation] == "" {
		return nil, bad(fieldIncarnation, fmt.Errorf("empty"))
	}
	if l.spec, err = parseSpec(m); err != nil {
		return nil, bad("spec", err)
	}
	l.memberGen = 1
	if g := m[fieldMemberGen]; g != "" {
		if l.memberGen, err = strconv.ParseInt(g, 10, 64); err != nil {
			return nil, bad(fieldMemberGen, err)
		}
	}
	l.keys = newKeys(s.prefix, id, m[fieldIncarnation], oneSlot(id, l.spec))
	if l.state == stateReshard {
		if l.to, err = strconv.Atoi(m[fieldTo]); err != nil {
			return nil, bad(fieldTo, err)
		}
	}
	if k := m[fieldNeedK]; k != "" {
		l.need = &need{}
		if l.need.shard, err = strconv.Atoi(k); err != nil {
			return nil, bad(fieldNeedK, err)
		}
		if l.need.delta, err = strconv.ParseInt(m[fieldNeedD], 10, 64); err != nil {
			return nil, bad(fieldNeedD, err)
		}
	}
	if h := m[fieldHistory]; h != "" {
		for _, e := range strings.Split(h, ",") {
			ns, us, ok := strings.Cut(e, "@")
			n, err1 := strconv.Atoi(ns)
			u, err2 := strconv.ParseInt(us, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				return nil, bad(fieldHistory, fmt.Errorf("entry %q", e))
			}
			l.hist = append(l.hist, past{n, u})
		}
	}
	return l, nil
}

// parseSpec reads a counter's kind, bounds and window from its metadata.
func parseSpec(m map[string]string) (shardcounter.Spec, error) {
	var spec shardcounter.Spec
	switch k := shardcounter.Kind(m[fieldKind]); k {
	case "", shardcounter.KindSum:
	case shardcounter.KindDistinct, shardcounter.KindApprox:
		spec.Kind = k
	default:
		return spec, fmt.Errorf("kind %q", k)
	}
	for f, p := range map[string]**int64{fieldMin: &spec.Min, fieldMaxBound: &spec.Max} {
		if v, ok := m[f]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return spec, fmt.Errorf("%s %q", f, v)
			}
			*p = &n
		}
	}
	if b, ok := m[fieldBucket]; ok {
		bs, err1 := strconv.ParseInt(b, 10, 64)
		rs, err2 := strconv.ParseInt(m[fieldRetention], 10, 64)
		if err1 != nil || err2 != nil {
			return spec, fmt.Errorf("window %q:%q", b, m[fieldRetention])
		}
		spec.Window = &shardcounter.Window{Bucket: shardcounter.Duration(time.Duration(bs) * time.Second), Retention: shardcounter.Duration(time.Duration(rs) * time.Second)}
	}
	return spec, nil
}

// specFields returns the metadata fields and values of a spec.
func specFields(spec shardcounter.Spec) []any {
	var f []any
	if spec.Kind == shardcounter.KindDistinct || spec.Kind == shardcounter.KindApprox {
		f = append(f, fieldKind, string(spec.Kind))
	}
	if spec.Min != nil {
		f = append(f, fieldMin, *spec.Min)
	}
	if spec.Max != nil {
		f = append(f, fieldMaxBound, *spec.Max)
	}
	if w := spec.Window; w != nil {
		f = append(f, fieldBucket, int64(time.Duration(w.Bucket)/time.Second), fieldRetention, int64(time.Duration(w.Retention)/time.Second))
	}
	return f
}

// nextHistory returns the history to record when the layout with l.n
// shards ends now and one with to shards begins: entries whose ids have all
// expired are dropped, and so is the new count itself, whose shards a
// retry will find anyway.
func (s *CounterStore) nextHistory(l *layout, to int, nowMS int64) string {
	h := append(slices.Clone(l.hist), past{l.n, nowMS})
	keep := h[:0]
	for _, p := range h {
		if p.n == to || p.until < nowMS-time.Duration(s.ttl.Load()).Milliseconds()-time.Hour.Milliseconds() {
			continue // an hour of margin for clocks that disagree
		}
		if i := slices.IndexFunc(keep, func(q past) bool { return q.n == p.n }); i >= 0 {
			keep[i].until = max(keep[i].until, p.until)
			continue
		}
		keep = append(keep, p)
	}
	if len(keep) > maxHistory {
		keep = keep[len(keep)-maxHistory:]
	}
	var b strings.Builder
	for i, p := range keep {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d@%d", p.n, p.until)
	}
	return b.String()
}

func (s *CounterStore) cached(id string) *layout {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.layouts[id]
}

// maxCached bounds the layout cache; past it the cache starts over, which
// costs one metadata read per counter.
const maxCached = 100_000

func (s *CounterStore) remember(l *layout) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.layouts) >= maxCached {
		clear(s.layouts)
	}
	s.layouts[l.id] = l
}

func (s *CounterStore) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.layouts, id)
}

// layout returns the counter's layout, from the cache unless fresh. A
// counter met in the middle of a reshard or a delete is first brought to
// the end of it (the protocols are idempotent, so any client may finish
// what a dead one started).
func (s *CounterStore) layout(ctx context.Context, id string, fresh bool) (*layout, error) {
	if !fresh {
		if l := s.cached(id); l != nil {
			return l, nil
		}
	}
	for range maxAttempts {
		m, err := s.client.HGetAll(ctx, metaKey(s.prefix, id)).Result()
		if err != nil {
			s.refresh(ctx, err)
			return nil, storeErr("read counter metadata", err, false)
		}
		l, err := s.parseLayout(id, m)
		if err != nil {
			return nil, err
		}
		if l, err = s.finishPending(ctx, id, l); err != nil || l != nil {
			return l, err
		}
	}
	return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "redis: counter %q keeps changing: try again", id)
}

// finishPending finishes a recorded reshard or delete of l. It returns l,
// cached, when nothing was pending; nil, nil when the caller should read the
// metadata again; ErrNotFound when there is no counter.
func (s *CounterStore) finishPending(ctx context.Context, id string, l *layout) (*layout, error) {
	switch {
	case l == nil:
		s.forget(id)
		return nil, notFound(id)
	case l.state == stateDelete:
		s.forget(id)
		if err := s.finishDelete(ctx, l); err != nil {
			return nil, err
		}
		return nil, notFound(id)
	case l.state == stateReshard:
		// A reshard that cannot finish (a fold would leave the int64
		// range) is turned into one that keeps the shard count: its
		// ErrOutOfRange is for the reshard's caller, not for the reads and
		// writes that met its intent and finished it.
		err := s.finishReshard(ctx, l)
		if err != nil && err != errMoved && !errors.Is(err, shardcounter.ErrOutOfRange) {
			return nil, err
		}
		return nil, nil
	}
	s.remember(l)
	return l, nil
}

func notFound(id string) error {
	return shardcounter.Errorf(shardcounter.ENOTFOUND, "counter %q not found", id)
}

// layoutsOf returns the layouts of ids, with nothing pending,, reading the uncached ones in
// one pipeline. A missing counter maps to nil.
func (s *CounterStore) layoutsOf(ctx context.Context, ids []string) (map[string]*layout, error) {
	out := make(map[string]*layout, len(ids))
	var miss []string
	for _, id := range ids {
		if _, seen := out[id]; seen {
			continue
		}
		if l := s.cached(id); l != nil {
			out[id] = l
		} else {
			out[id] = nil
			miss = append(miss, id)
		}
	}
	if len(miss) == 0 {
		return out, nil
	}
	cmds := make([]*goredis.MapStringStringCmd, len(miss))
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, id := range miss {
			cmds[i] = p.HGetAll(ctx, metaKey(s.prefix, id))
		}
		return nil
	})
	if err != nil {
		s.refresh(ctx, err)
		return nil, storeErr("read counter metadata", err, false)
	}
	for i, id := range miss {
		l, err := s.parseLayout(id, cmds[i].Val())
		if err != nil {
			return nil, err
		}
		if l != nil && l.state != "" {
			l, err = s.layout(ctx, id, true) // finish the reshard or delete first
			if shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
				l, err = nil, nil
			}
			if err != nil {
				return nil, err
			}
		} else if l != nil {
			s.remember(l)
		}
		out[id] = l
	}
	return out, nil
}

// newIncarnation returns a random name for a new counter's shard keys.
func newIncarnation() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
