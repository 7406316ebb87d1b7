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
