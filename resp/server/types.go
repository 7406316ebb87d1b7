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
// claimed plain and of the names claimed for a hash. A hash's first write
// creates its marker, so that whether a name holds a hash is known from
// one read of a known id. Within one server the claims are exact: a name
// is claimed under the cache's lock, so two commands of different types
// on a new name cannot both pass. Across servers sharing a store (or a
// plain counter created over HTTP) the check is no transaction: two
// servers that first meet a name at the same moment may both pass, and a
// server's cache may hold a name's type for up to typeTTL after another
// server changed it. docs/RESP.md, "Types", says so.

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
	if !ok || now.Sub(e.at) > typeTTL {
		return typeNone, false
	}
	return e.t, true
}

// set records name's type. tc.mu is held.
func (tc *typeCache) set(name string, t nameType, now time.Time) {
	if tc.m == nil {
		tc.m = make(map[string]typeEntry)
	}
	if len(tc.m) >= maxTypeEntries {
		tc.evict(now)
	}
	tc.m[name] = typeEntry{t, now}
}

// evict makes room: it drops the entries past typeTTL, and when those are
// not a quarter of the cache, a quarter of the others (map order is
// random enough). tc.mu is held.
func (tc *typeCache) evict(now time.Time) {
	for k, e := range tc.m {
		if now.Sub(e.at) > typeTTL {
			delete(tc.m, k)
		}
	}
	for k := range tc.m {
		if len(tc.m) < maxTypeEntries*3/4 {
			break
		}
		delete(tc.m, k)
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

// forget drops what the cache knows of names (after DEL or HDEL).
func (tc *typeCache) forget(names ...string) {
	tc.mu.Lock()
	for _, n := range names {
		delete(tc.m, n)
	}
	tc.mu.Unlock()
}

// clear drops everything (after FLUSHALL).
func (tc *typeCache) clear() {
	tc.mu.Lock()
	tc.m = nil
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

// claimTypes claims each name of cs for its type and returns, per claim,
// "" or the error reply of its writes: WRONGTYPE when the name holds the
// other type, or the store's error when asking it failed. A hash claim
// that finds the name free creates the hash's marker before it returns.
func (s *Server) claimTypes(ctx context.Context, cs []claim) []string {
	out := make([]string, len(cs))
	now := time.Now()
	tc := &s.types
	var ask []claim // names to ask the store about, once each
	seen := make(map[claim]bool)
	tc.mu.Lock()
	recheck := make(map[string]bool) // cached as the other type: ask the store
	for _, c := range cs {
		if t, ok := tc.fresh(c.name, now); ok {
			if t == c.t {
				continue
			}
			// The name may have expired or been reset since: a WRONGTYPE
			// is only ever the store's answer.
			recheck[c.name] = true
		}
		if !seen[c] {
			seen[c] = true
			ask = append(ask, c)
		}
	}
	tc.mu.Unlock()
	if len(ask) == 0 {
		return out
	}
	held, failed := s.probeTypes(ctx, ask)
	// Decide each asked name under the lock: a claim made meanwhile (by
	// another connection's batch) stands; a free name goes to the first
	// claim of this batch.
	var markers []string // hashes this batch makes
	tc.mu.Lock()
	now = time.Now()
	for i, c := range cs {
		if out[i] != "" || !seen[c] {
			continue
		}
		if msg, ok := failed[c.name]; ok {
			out[i] = msg
			continue
		}
		t, ok := tc.fresh(c.name, now)
		if !ok || recheck[c.name] {
			t = held[c.name]
			if t == typeNone {
				t = c.t
				if t == typeHash {
					markers = append(markers, c.name)
				}
			}
			tc.set(c.name, t, now)
		}
		if t != c.t {
			out[i] = wrongType(c.name, t)
		}
	}
	tc.mu.Unlock()
	errs := make([]error, len(markers))
	eachAtOnce(len(markers), func(k int) { errs[k] = s.createMarker(ctx, markers[k]) })
	for k, name := range markers {
		if err := errs[k]; err != nil {
			tc.forget(name)
			for i, c := range cs {
				if c.name == name && out[i] == "" {
					out[i] = errorReply(err)
				}
			}
		}
	}
	return out
}

// claimsAtOnce bounds how many of one batch's claims ask the store at
// once (eachAtOnce).
const claimsAtOnce = 16

// eachAtOnce runs f(0) ... f(n-1), up to claimsAtOnce at a time, and
// returns when all have. The claims of one batch's new names (a marker
// each to create, a field each to look for) are independent: run one
// after another they cost a commit or a read each in the serving loop,
// run together the store shares one commit among them (the engine's
// group commit does not serve CreateCounter) and overlaps the reads.
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

// createMarker creates the marker of a hash: a counter of one shard that
// counts nothing.
func (s *Server) createMarker(ctx context.Context, hash string) error {
	_, _, err := s.svc.CreateCounter(ctx, shardcounter.HashMarkerID(hash), shardcounter.CreateOptions{Shards: 1})
	if errors.Is(err, shardcounter.ErrExists) {
		return nil // made with other options, by hand: a marker all the same
	}
	return err
}

// probeTypes asks the store what the names of cs hold, with one batch
// read (per MaxReadBatch ids) of the marker of each name claimed plain
// and of each name claimed for a hash; a marker without fields (its hash
// emptied by HDEL) leaves its name free. It returns the type
// held by each name that holds one, and the error reply of each name it
// could not learn about.
func (s *Server) probeTypes(ctx context.Context, cs []claim) (map[string]nameType, map[string]string) {
	held := make(map[string]nameType)
	failed := make(map[string]string)
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.name
		if c.t == typePlain {
			ids[i] = shardcounter.HashMarkerID(c.name)
		}
	}
	rs, err := s.readMany(ctx, ids)
	if err != nil {
		for _, c := range cs {
			failed[c.name] = errorReply(err)
		}
		return held, failed
	}
	var hashes []string // names whose marker exists: do they have a field?
	for i, c := range cs {
		switch r := rs[i]; {
		case errors.Is(r.Err, shardcounter.ErrNotFound):
		case r.Err != nil:
			failed[c.name] = errorReply(r.Err)
		case c.t == typeHash:
			held[c.name] = typePlain
		default:
			hashes = append(hashes, c.name)
		}
	}
	ts := make([]nameType, len(hashes))
	errs := make([]error, len(hashes))
	eachAtOnce(len(hashes), func(k int) { ts[k], errs[k] = s.hashOrEmpty(ctx, hashes[k]) })
	for k, name := range hashes {
		if errs[k] != nil {
			failed[name] = errorReply(errs[k])
		} else if ts[k] != typeNone {
			held[name] = ts[k]
		}
	}
	return held, failed
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
