package authtoken_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/internal/authtoken"
)

// TestGuard checks the limiter: 100 failures from one address at full
// speed, then each further one throttled with a wait of at least the
// interval, one more allowed per interval, other addresses unaffected, a
// burst reported once, and the counts kept per protocol.
func TestGuard(t *testing.T) {
	now := time.Unix(1000, 0)
	var bursts []string
	g := &authtoken.Guard{
		Now: func() time.Time { return now },
		OnBurst: func(addr string, p authtoken.Protocol, n int64) {
			bursts = append(bursts, fmt.Sprintf("%s %s %d", addr, p, n))
		},
	}
	for i := range authtoken.DefaultBurst {
		if v := g.Fail(authtoken.HTTP, "192.0.2.1:4000"); v.Throttled {
			t.Fatalf("failure %d of the burst was throttled", i+1)
		}
	}
	for i := range 5 {
		v := g.Fail(authtoken.RESP, "192.0.2.1:4001") // another port: the same address
		if !v.Throttled || v.Wait < authtoken.DefaultInterval {
			t.Fatalf("failure %d past the burst: %+v, want throttled with a wait of at least %v", i+1, v, authtoken.DefaultInterval)
		}
	}
	if v := g.Fail(authtoken.HTTP, "192.0.2.2:4000"); v.Throttled {
		t.Fatal("another address was throttled")
	}
	if want := []string{"192.0.2.1/32 resp 101"}; fmt.Sprint(bursts) != fmt.Sprint(want) {
		t.Errorf("bursts reported %q, want %q", bursts, want)
	}
	// Throttled, an address stays so until its allowance is back in full,
	// however slowly it fails meanwhile; the wait says when that is.
	for range 10 {
		now = now.Add(authtoken.DefaultInterval)
		if v := g.Fail(authtoken.HTTP, "192.0.2.1"); !v.Throttled || v.Delay != authtoken.DefaultDelay {
			t.Fatalf("a failure one interval after a throttled one: %+v, want throttled with a delay of one interval", v)
		}
	}
	if v := g.Fail(authtoken.HTTP, "192.0.2.1"); v.Wait != (authtoken.DefaultBurst-10)*authtoken.DefaultInterval {
		t.Errorf("wait %v, want %v: until the allowance is back in full", v.Wait, (authtoken.DefaultBurst-10)*authtoken.DefaultInterval)
	}
	// Once the allowance is back in full, a new burst is allowed and
	// reported again when it runs out.
	now = now.Add(authtoken.DefaultBurst * authtoken.DefaultInterval)
	for range authtoken.DefaultBurst + 1 {
		g.Fail(authtoken.HTTP, "192.0.2.1")
	}
	if len(bursts) != 2 {
		t.Errorf("bursts reported %q, want a second one", bursts)
	}
	if got := g.Failures(authtoken.HTTP) + g.Failures(authtoken.RESP); got != 100+5+1+11+101 {
		t.Errorf("failures = %d, want %d", got, 100+5+1+11+101)
	}
	if got := g.Throttled(authtoken.RESP); got != 5 {
		t.Errorf("throttled over RESP = %d, want 5", got)
	}
}

// TestGuardAddresses checks that IPv6 addresses count by /64 and that
// the table of addresses stays bounded.
func TestGuardAddresses(t *testing.T) {
	g := &authtoken.Guard{Burst: 1, MaxAddrs: 10}
	g.Fail(authtoken.HTTP, "[2001:db8::1]:80")
	if v := g.Fail(authtoken.HTTP, "[2001:db8::2]:80"); !v.Throttled {
		t.Error("a second address of the same /64 was not counted with the first")
	}
	for i := range 1000 {
		g.Fail(authtoken.HTTP, fmt.Sprintf("198.51.100.%d:1", i%250))
	}
	g.Fail(authtoken.HTTP, "not an address")
}
