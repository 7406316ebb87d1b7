package acl

import (
	"sync"
	"sync/atomic"
)

// Set holds a server's current Users, replaced on SIGHUP while requests
// are checked. The zero value holds none: no client needs to
// authenticate and every client is Everyone. A Set is safe for
// concurrent use.
type Set struct {
	p atomic.Pointer[generation]

	mu      sync.Mutex
	changed chan struct{} // closed by the next Replace
}

// generation is one generation of a Set's users.
type generation struct {
	users *Users
	gen   uint64
}

// Replace makes us the current users; nil means none (no authentication,
// every client Everyone). A session that keeps its User learns, from
// Generation, that it must look its user up again (Current).
func (s *Set) Replace(us *Users) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gen uint64
	if old := s.p.Load(); old != nil {
		gen = old.gen + 1
	}
	s.p.Store(&generation{users: us, gen: gen})
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// Users returns the current users, nil when there are none.
func (s *Set) Users() *Users {
	if p := s.p.Load(); p != nil {
		return p.users
	}
	return nil
}

// Generation returns a number that changes with every Replace: one atomic
// load, so that a session can check on every command whether its rights
// may have changed.
func (s *Set) Generation() uint64 {
	if p := s.p.Load(); p != nil {
		return p.gen
	}
	return 0
}

// Changed returns a channel that the next Replace closes, for a
// long-lived request (a watch stream) that must end when its user loses
// its rights.
func (s *Set) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// Required reports whether a client must authenticate: there are users
// and default is not on and nopass.
func (s *Set) Required() bool {
	us := s.Users()
	return us != nil && us.Default() == nil
}

// Unauthenticated returns the user a client is before it authenticates:
// Everyone when there are no users, default when it is on and nopass,
// else nil.
func (s *Set) Unauthenticated() *User {
	us := s.Users()
	if us == nil {
		return Everyone
	}
	return us.Default()
}

// Authenticate returns the user of a name and password, or nil. With no
// users, every pair is Everyone's, as Redis's default user with nopass
// takes any password.
func (s *Set) Authenticate(name, password []byte) *User {
	us := s.Users()
	if us == nil {
		if string(name) == "default" {
			return Everyone
		}
		return nil
	}
	return us.Authenticate(name, password)
}

// Current returns what u is now, after a Replace: the user of u's name
// when it is still on and still takes the password of digest d (d nil:
// u authenticated without one, as default nopass, or by a client
// certificate), else nil.
func (s *Set) Current(u *User, d *Digest) *User {
	us := s.Users()
	if us == nil {
		return Everyone
	}
	now := us.Lookup(u.name)
	if now == nil || !now.on {
		return nil
	}
	if d != nil && !now.password(*d) {
		return nil
	}
	if d == nil && u.nopass && !now.nopass {
		return nil
	}
	return now
}
