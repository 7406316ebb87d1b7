// Package authtoken holds the secrets a server accepts from its clients:
// the HTTP API's bearer tokens and the Redis protocol's AUTH passwords,
// which are the same tokens, read from one --auth-token-file. It also
// keeps the Guard that slows clients who keep presenting wrong ones
// (guard.go).
package authtoken

import (
	"crypto/sha256"
	"crypto/subtle"
	"sync"
	"sync/atomic"
)

// Digest is the SHA-256 of a token. Tokens are compared as digests, which
// all have one length, so the time a comparison takes says nothing about
// the length of the token it was compared with (crypto/subtle's
// ConstantTimeCompare returns at once on a length mismatch).
type Digest [sha256.Size]byte

// DigestOf returns the digest of token.
func DigestOf(token []byte) Digest { return sha256.Sum256(token) }

// Set is the tokens a server accepts. The zero value holds none, and then
// no token is needed. A Set is safe for concurrent use: Replace may run
// (on SIGHUP, say) while requests are checked.
type Set struct {
	p atomic.Pointer[state]

	mu      sync.Mutex
	changed chan struct{} // closed by the next Replace
}

// state is one generation of a Set's tokens.
type state struct {
	digests []Digest
	gen     uint64
}

// Replace makes tokens the accepted ones; none means no token is needed.
// A request already checked is not affected; a session that keeps the
// Digest it authenticated with can tell whether its token is still
// accepted (Holds) once Generation has moved on.
func (s *Set) Replace(tokens []string) {
	ds := make([]Digest, len(tokens))
	for i, t := range tokens {
		ds[i] = DigestOf([]byte(t))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var gen uint64
	if old := s.p.Load(); old != nil {
		gen = old.gen + 1
	}
	s.p.Store(&state{digests: ds, gen: gen})
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// Generation returns a number that changes with every Replace: one atomic
// load, so that a session can check on every command whether the tokens
// changed since it authenticated.
func (s *Set) Generation() uint64 {
	if p := s.p.Load(); p != nil {
		return p.gen
	}
	return 0
}

// Changed returns a channel that the next Replace closes, for a long-lived
// request (a watch stream) that must end as soon as its token is removed.
func (s *Set) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// Required reports whether a client must present a token: whether the
// set holds any.
func (s *Set) Required() bool {
	p := s.p.Load()
	return p != nil && len(p.digests) > 0
}

// Match reports whether token is one of the set's. It compares the
// token's digest against every token's in constant time, so the timing of
// the answer reveals neither how much of a token matched, nor which one,
// nor how long the tokens are. An empty token matches nothing, and an
// empty set matches nothing: check Required first.
func (s *Set) Match(token []byte) bool {
	if len(token) == 0 {
		return false
	}
	return s.Holds(DigestOf(token))
}

// Holds reports, in constant time, whether the token of digest d is one
// of the set's.
func (s *Set) Holds(d Digest) bool {
	p := s.p.Load()
	if p == nil {
		return false
	}
	match := 0
	for i := range p.digests {
		match |= subtle.ConstantTimeCompare(d[:], p.digests[i][:])
	}
	return match == 1
}
