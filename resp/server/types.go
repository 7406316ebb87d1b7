package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/shardcounter/shardcounter"
)

// A name holds one type at a time, as a Redis key does: a plain counter
// (TYPE string for a sum counter, set for a distinct one) or a hash of
// counters. The store keeps the kinds of plain counters apart itself (an
// INCR of a distinct counter is refused as an item of its batch), but a
// hash's fields are counters of their own ids (shardcounter.HashFieldID),
// so nothing in the store stops a plain counter "k" from being created
// beside the fields of hash "k". The server does: before a batch writes
// a name, it claims the name for the writes' type, and a write of the
// other type gets WRONGTYPE.
//
// A claim looks in the server's cache of names first, and asks the store
// only for names it does not hold (or holds for longer than typeTTL): one
// batch read of the hash markers (shardcounter.HashMarkerID) of names
// claimed plain, and of the counter and the marker of names claimed for a
// hash. A hash's first write makes its marker, a write joined to the
// field's (Write.JoinNext) in the same commit, so that whether a name
// holds a hash is known from one read of a known id, and the marker is
// never missing beside a committed field.
//
// Within one server the claims are exact: a name is claimed under the
// cache's lock, so two commands of different types on a new name cannot
// both pass. A name a batch claims afresh stays pending in the cache until
// the batch's commit is done: its type is then the cache's answer alone
// (WRONGTYPE to the other type, without asking the store, which does not
// hold the name yet), and the entry is neither evicted nor forgotten
// meanwhile. Across servers sharing a store (or a plain counter created
// over HTTP) the check is no transaction: two servers that first meet a
// name at the same moment may both pass, and a server's cache may hold a
// name's type for up to typeTTL after another server changed it.
// docs/RESP.md, "Types", says so.

// nameType is what a name holds: a plain counter or a hash.
type nameType uint8

const (
	typeNone  nameType = iota // nothing: the name is free
	typePlain                 // a counter: TYPE string (sum) or set (distinct)
	typeHash                  // a hash of counters
)

const (
	// typeTTL is how long the cache trusts what it learnt of a name
	// before asking the store again.
	typeTTL = 10 * time.Second
	// maxTypeEntries bounds the names the cache holds.
	maxTypeEntries = 1 << 16
)

// typeEntry is what the cache knows of one name.
type typeEntry struct {
	t  nameType
	at time.Time
	// pending counts the batches in flight that claimed the name afresh
	// (claimTypes) and have not settled: while it is not 0 the entry is
	// the name's type, fresh whatever its age.
	pending int32
}

// typeCache remembers the types of names. It is safe for concurrent use.
type typeCache struct {
	mu sync.Mutex
	m  map[string]typeEntry
}

// claim is one name a batch writes, and the type its writes give it.
type claim struct {
	name string
	t    nameType
}

// fresh returns the cached type of name, when the cache holds one not
// older than typeTTL. tc.mu is held.
func (tc *typeCache) fresh(name string, now time.Time) (nameType, bool) {
	e, ok := tc.m[name]
	if !ok || e.pending == 0 && now.Sub(e.at) > typeTTL {
		return typeNone, false
	}
	return e.t, true
}

// set records name's type, keeping its pending count. tc.mu is held.
func (tc *typeCache) set(name string, t nameType, now time.Time) {
	if tc.m == nil {
		tc.m = make(map[string]typeEntry)
	}
	if len(tc.m) >= maxTypeEntries {
		tc.evict(now)
	}
	tc.m[name] = typeEntry{t: t, at: now, pending: tc.m[name].pending}
}

// pend records that a batch claimed name afresh for t: the entry stands
// until the batch settles it. tc.mu is held.
func (tc *typeCache) pend(name string, t nameType, now time.Time) {
	tc.set(name, t, now)
	e := tc.m[name]
	e.pending++
	tc.m[name] = e
}

// settle ends the pending claims of names (claimTypes' made), once their
// batch's commit is done, whether it succeeded or not.
func (tc *typeCache) settle(names []string) {
	if len(names) == 0 {
		return
	}
	tc.mu.Lock()
	for _, n := range names {
		if e, ok := tc.m[n]; ok && e.pending > 0 {
			e.pending--
			tc.m[n] = e
		}
	}
	tc.mu.Unlock()
}

// evict makes room: it drops the entries past typeTTL, and when those are
// not a quarter of the cache, a quarter of the others (map order is
// random enough), never a pending one. tc.mu is held.
func (tc *typeCache) evict(now time.Time) {
	for k, e := range tc.m {
		if e.pending == 0 && now.Sub(e.at) > typeTTL {
			delete(tc.m, k)
		}
	}
	for k, e := range tc.m {
		if len(tc.m) < maxTypeEntries*3/4 {
			break
		}
		if e.pending == 0 {
			delete(tc.m, k)
		}
	}
}

// hold reports whether the cache holds, not older than typeTTL, every
// name ws write with the type the writes give it: then they need no
// claim. It is the path of nearly every batch, so it allocates nothing,
// and looks a name up once for a run of writes to it.
func (tc *typeCache) hold(ws []shardcounter.Write) bool {
	now := time.Now()
	tc.mu.Lock()
	defer tc.mu.Unlock()
	last, lastType := "", typeNone
	for _, w := range ws {
		if w.Expire != nil || w.Take != nil {
			continue // a deadline change claims no type: it acts on either; a take's state is no key's
		}
		name, t := writeName(w)
		if t == lastType && name == last {
			continue
		}
		if held, ok := tc.fresh(name, now); !ok || held != t {
			return false
		}
		last, lastType = name, t
	}
	return true
}

// forget drops what the cache knows of names (after DEL or HDEL), but
// for a pending claim: its batch's commit is about to give the name that
// type.
func (tc *typeCache) forget(names ...string) {
	tc.mu.Lock()
	for _, n := range names {
		if tc.m[n].pending == 0 {
			delete(tc.m, n)
		}
	}
	tc.mu.Unlock()
}

// clear drops everything but the pending claims (after FLUSHALL).
func (tc *typeCache) clear() {
	tc.mu.Lock()
	for k, e := range tc.m {
		if e.pending == 0 {
			delete(tc.m, k)
		}
	}
	tc.mu.Unlock()
}

// wrongType is the reply to a command on a name that holds another type.
func wrongType(name string, held nameType) string {
	what := "a counter (TYPE string or set)"
	if held == typeHash {
		what = "a hash of counters"
	}
	return errWrongType + ": " + quote(name) + " holds " + what
}

// claimed is what claimTypes decided for a batch's claims.
type claimed struct {
	// refused holds, per claim, "" or the error reply of its writes.
	refused []string
	// markers are the hashes the batch makes: a write of each one's
	// marker goes in the batch, joined to the hash's first write
	// (markerWrite).
	markers []string
	// made are the names the batch claimed afresh, pending in the cache
	// until typeCache.settle, which the batch calls once its commit is
	// done, whatever its outcome.
	made []string
}

// claimTypes claims each name of cs for its type: refused holds, per
// claim, "" or the error reply of its writes, WRONGTYPE when the name
// holds the other type (or a batch in flight claims it for the other
// type), or the store's error when asking it failed. A hash claim that
// finds the name free and without a marker names it in markers: the
// batch writes the marker with the hash's write. The names it claims
// afresh are pending until the caller settles made.
func (s *Server) claimTypes(ctx context.Context, cs []claim) claimed {
	out := claimed{refused: make([]string, len(cs))}
	now := time.Now()
	tc := &s.types
	var ask []claim             // names to ask the store about, once each
	asked := map[claim]int{}    // the index in ask of each claim asked
	var recheck map[string]bool // cached as the other type: ask the store
	tc.mu.Lock()
	for i, c := range cs {
		if e, ok := tc.m[c.name]; ok && e.pending > 0 {
			// A batch in flight claimed the name: its commit gives it
			// that type, which the store does not show yet.
			if e.t != c.t {
				out.refused[i] = wrongType(c.name, e.t)
			}
			continue
		}
		if t, ok := tc.fresh(c.name, now); ok {
			if t == c.t {
				continue
			}
			// The name may have expired or been reset since: a WRONGTYPE
			// is only ever the store's answer, or a pending claim's.
			if recheck == nil {
				recheck = make(map[string]bool)
			}
			recheck[c.name] = true
		}
		if _, ok := asked[c]; !ok {
			asked[c] = len(ask)
			ask = append(ask, c)
		}
	}
	tc.mu.Unlock()
	if len(ask) == 0 {
		return out
	}
	ps := s.probeTypes(ctx, ask)
	// Decide each asked name under the lock: a claim made meanwhile (by
	// another connection's batch) stands; a free name goes to the first
	// claim of this batch.
	tc.mu.Lock()
	now = time.Now()
	for i, c := range cs {
		k, ok := asked[c]
		if out.refused[i] != "" || !ok {
			continue
		}
		p := ps[k]
		if p.err != "" {
			out.refused[i] = p.err
			continue
		}
		e, cached := tc.m[c.name]
		t := e.t
		switch {
		case cached && e.pending > 0:
			// Claimed meanwhile, or by an earlier claim of this batch.
		case cached && now.Sub(e.at) <= typeTTL && !recheck[c.name]:
			// Learnt meanwhile.
		case p.held != typeNone:
			t = p.held
			tc.set(c.name, t, now)
		default:
			t = c.t
			tc.pend(c.name, t, now)
			out.made = append(out.made, c.name)
			if t == typeHash && !p.marked {
				out.markers = append(out.markers, c.name)
			}
		}
		if t != c.t {
			out.refused[i] = wrongType(c.name, t)
		}
	}
	tc.mu.Unlock()
	return out
}

// claimsAtOnce bounds how many of one batch's claims ask the store at
// once (eachAtOnce).
const claimsAtOnce = 16

// eachAtOnce runs f(0) ... f(n-1), up to claimsAtOnce at a time, and
// returns when all have. The claims of one batch's names (a field each to
// look for, a marker each to make when its joined write failed) are
// independent: run one after another they cost a read or a commit each in
// the serving loop, run together the store overlaps them.
func eachAtOnce(n int, f func(i int)) {
	if n <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	sem := make(chan struct{}, claimsAtOnce)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

// markerWrite is the write that makes the marker of hash, joined to the
// write after it, the hash's first write of the batch, so that they
// commit together: a counter that counts the writes that made it (1,
// unless two servers made it at once), of one shard when the service
// creates it on write (the engine does, for a marker's id). Its value
// means nothing; only its existence does.
func markerWrite(hash string) shardcounter.Write {
	return shardcounter.Write{Counter: shardcounter.HashMarkerID(hash), Delta: 1, JoinNext: true}
}

// createMarker creates the marker of hash on its own, a commit of its
// own: for a hash whose joined marker write failed while its field's
// write was applied.
func (s *Server) createMarker(ctx context.Context, hash string) error {
	_, _, err := s.svc.CreateCounter(ctx, shardcounter.HashMarkerID(hash), shardcounter.CreateOptions{Shards: 1})
	if errors.Is(err, shardcounter.ErrExists) {
		return nil // made meanwhile, or with other options by hand: a marker all the same
	}
	return err
}

// probe is what the store says of one claim's name (probeTypes).
type probe struct {
	held   nameType // the type the name holds, typeNone for none
	marked bool     // for a hash claim: the name's marker exists
	err    string   // the error reply when the store could not say
}

// probeTypes asks the store what the names of cs hold, with one batch
// read (per MaxReadBatch ids) of the marker of each name claimed plain,
// and of the counter and the marker of each name claimed for a hash; a
// marker without fields (its hash emptied by HDEL) leaves its name free.
// It returns a probe per claim.
func (s *Server) probeTypes(ctx context.Context, cs []claim) []probe {
	out := make([]probe, len(cs))
	ids := make([]string, 0, 2*len(cs))
	for _, c := range cs {
		if c.t == typeHash {
			ids = append(ids, c.name)
		}
		ids = append(ids, shardcounter.HashMarkerID(c.name))
	}
	rs, err := s.readMany(ctx, ids)
	if err != nil {
		for i := range out {
			out[i].err = errorReply(err)
		}
		return out
	}
	var hashes []int // claims whose name has a marker: has it a field?
	j := 0
	for i, c := range cs {
		if c.t == typeHash {
			switch r := rs[j]; {
			case r.Err == nil:
				out[i].held = typePlain
			case !errors.Is(r.Err, shardcounter.ErrNotFound):
				out[i].err = errorReply(r.Err)
			}
			j++
		}
		switch r := rs[j]; {
		case errors.Is(r.Err, shardcounter.ErrNotFound):
		case r.Err != nil:
			out[i].err = errorReply(r.Err)
		case c.t == typeHash:
			out[i].marked = true
		default:
			hashes = append(hashes, i)
		}
		j++
	}
	eachAtOnce(len(hashes), func(k int) {
		i := hashes[k]
		t, err := s.hashOrEmpty(ctx, cs[i].name)
		if err != nil {
			out[i].err = errorReply(err)
		} else {
			out[i].held = t
		}
	})
	return out
}

// hashOrEmpty is called for a name whose marker exists: it returns
// typeHash when the hash has a field, typeNone when it has none (HDEL
// emptied it). The marker of an emptied hash stays, counting nothing,
// until DEL: removing it here could race with a hash's first write on
// another server, which makes the marker before its field.
func (s *Server) hashOrEmpty(ctx context.Context, name string) (nameType, error) {
	fields, err := s.hashFields(ctx, name, 1)
	if err != nil || len(fields) > 0 {
		return typeHash, err
	}
	return typeNone, nil
}

// typeOf returns what name holds, for a command that reads it: from the
// store (its counter, else its marker and a field), never from the cache,
// which may hold a name that expired since. What it finds fills the cache
// for the claims of writes.
func (s *Server) typeOf(ctx context.Context, name string) (nameType, error) {
	tc := &s.types
	var t nameType
	rs, err := s.readMany(ctx, []string{name, shardcounter.HashMarkerID(name)})
	if err != nil {
		return typeNone, err
	}
	for _, r := range rs {
		if r.Err != nil && !errors.Is(r.Err, shardcounter.ErrNotFound) {
			return typeNone, r.Err
		}
	}
	switch {
	case rs[0].Err == nil:
		t = typePlain
	case rs[1].Err == nil:
		if t, err = s.hashOrEmpty(ctx, name); err != nil {
			return typeNone, err
		}
	}
	if t != typeNone {
		tc.mu.Lock()
		if _, ok := tc.fresh(name, time.Now()); !ok {
			tc.set(name, t, time.Now())
		}
		tc.mu.Unlock()
	}
	return t, nil
}
