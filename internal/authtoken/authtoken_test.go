package authtoken_test

import (
	"testing"

	"github.com/shardcounter/shardcounter/internal/authtoken"
)

func TestSet(t *testing.T) {
	var s authtoken.Set
	if s.Required() || s.Match([]byte("")) || s.Match([]byte("a")) {
		t.Fatal("the zero Set requires a token or matches one")
	}
	s.Replace([]string{"alpha", "beta"})
	if !s.Required() {
		t.Fatal("a Set with tokens does not require one")
	}
	for token, want := range map[string]bool{"alpha": true, "beta": true, "": false, "alph": false, "alphaa": false, "gamma": false} {
		if got := s.Match([]byte(token)); got != want {
			t.Errorf("Match(%q) = %v, want %v", token, got, want)
		}
	}
	s.Replace([]string{""})
	if s.Match(nil) {
		t.Error("an empty token matched")
	}
	s.Replace(nil)
	if s.Required() || s.Match([]byte("alpha")) {
		t.Fatal("after Replace(nil) a token is still required or matched")
	}
}

// TestSetGenerations checks what a session needs to notice that its
// token was removed: Generation moves on with every Replace, Holds says
// whether a digest is still accepted, and Changed is closed by Replace.
func TestSetGenerations(t *testing.T) {
	var s authtoken.Set
	s.Replace([]string{"alpha", "beta"})
	gen, ch := s.Generation(), s.Changed()
	d := authtoken.DigestOf([]byte("alpha"))
	if !s.Holds(d) {
		t.Fatal("Holds(digest of alpha) = false while alpha is accepted")
	}
	select {
	case <-ch:
		t.Fatal("Changed is closed before any Replace")
	default:
	}
	s.Replace([]string{"beta"})
	if s.Generation() == gen {
		t.Error("Generation did not change with Replace")
	}
	if s.Holds(d) {
		t.Error("Holds(digest of alpha) = true after alpha was removed")
	}
	if !s.Holds(authtoken.DigestOf([]byte("beta"))) {
		t.Error("Holds(digest of beta) = false, beta is still accepted")
	}
	select {
	case <-ch:
	default:
		t.Error("Changed is not closed after Replace")
	}
}
