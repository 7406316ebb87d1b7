// Package authtoken holds the secrets a server accepts from its clients:
// the HTTP API's bearer tokens and the Redis protocol's AUTH passwords,
// which are the same tokens, read from one --auth-token-file.
package authtoken

import (
	"crypto/subtle"
	"sync/atomic"
)

// Set is the tokens a server accepts. The zero value holds none, and then
// no token is needed. A Set is safe for concurrent use: Replace may run
// (on SIGHUP, say) while requests are checked.
type Set struct {
	p atomic.Pointer[[][]byte]
}

// Replace makes tokens the accepted ones; none means no token is needed.
// A request already checked is not affected.
func (s *Set) Replace(tokens []string) {
	bs := make([][]byte, len(tokens))
	for i, t := range tokens {
		bs[i] = []byte(t)
	}
	s.p.Store(&bs)
}

// Required reports whether a client must present a token: whether the
// set holds any.
func (s *Set) Required() bool {
	p := s.p.Load()
	return p != nil && len(*p) > 0
}

// Match reports whether token is one of the set's. It compares against
// every token in constant time, so the timing of the answer reveals
// neither how much of a token matched nor which one. An empty token
// matches nothing, and an empty set matches nothing: check Required first.
func (s *Set) Match(token []byte) bool {
	p := s.p.Load()
	if p == nil || len(token) == 0 {
		return false
	}
	match := 0
	for _, want := range *p {
		match |= subtle.ConstantTimeCompare(token, want)
	}
	return match == 1
}
