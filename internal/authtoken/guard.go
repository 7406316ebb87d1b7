// Package authtoken keeps the Guard that slows clients who keep
// presenting wrong credentials, on either port (the users and their
// passwords are package acl's).
package authtoken

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Guard.
const (
	// DefaultBurst is how many failed authentications one address may
	// make at full speed.
	DefaultBurst = 100
	// DefaultInterval is how often, past the burst, an address earns one
	// more failure at full speed: ten a second.
	DefaultInterval = 100 * time.Millisecond
	// DefaultDelay is how long a throttled failure's reply is held.
	DefaultDelay = 100 * time.Millisecond
	// DefaultMaxAddrs bounds the addresses a Guard remembers, so that
	// failures from many addresses cannot grow its memory without bound.
	DefaultMaxAddrs = 10000
)

// Protocol names the front end a failure came through, for the counts.
type Protocol int

const (
	HTTP Protocol = iota
	RESP
	numProtocols
)

func (p Protocol) String() string {
	if p == RESP {
		return "resp"
	}
	return "http"
}

// Guard counts failed authentications and slows them down by remote
// address, as a rate limiter with a burst: each address may fail Burst
// times at full speed, its allowance coming back one failure per Interval
// (the generic cell rate algorithm: one timestamp per address). A failure
// past the allowance is throttled, and so is every further one until the
// allowance is back in full, Burst × Interval after the last failure at
// full speed: the caller answers a throttled failure late (RESP:
// -WRONGPASS after the Verdict's Delay) or refuses it at once (HTTP: 429
// resource_exhausted, Retry-After the Verdict's Wait). Only failures are
// counted, and a right token is never slowed, so a client that knows the
// token gets in from an address that others hammer.
//
// An address is an IP; IPv6 addresses are taken by their /64, which is
// what one host usually holds. The zero Guard is ready to use with the
// defaults. A Guard is safe for concurrent use.
type Guard struct {
	// Burst, Interval, Delay and MaxAddrs default to DefaultBurst,
	// DefaultInterval, DefaultDelay and DefaultMaxAddrs.
	Burst    int
	Interval time.Duration
	Delay    time.Duration
	MaxAddrs int
	// OnBurst, when set, is called once when an address starts being
	// throttled, with the failures it made since it last had its full
	// allowance: a log line per burst, not one per try. It is called
	// without the Guard's lock held.
	OnBurst func(addr string, p Protocol, failures int64)
	// Now is the clock; default time.Now.
	Now func() time.Time

	mu    sync.Mutex
	addrs map[netip.Prefix]*entry

	failures  [numProtocols]atomic.Int64
	throttled [numProtocols]atomic.Int64
}

// entry is what a Guard knows of one address.
type entry struct {
	tat       time.Time // theoretical arrival time: the allowance is back in full then
	failures  int64     // since the allowance was last full
	throttled bool      // OnBurst was called for this burst
}

// Verdict is what a Guard says of one failure.
type Verdict struct {
	// Throttled is set on a failure past the address's allowance.
	Throttled bool
	// Wait, on a throttled failure, is how long until the address may
	// fail at full speed again, at least the Guard's Interval: an HTTP
	// server sends it as Retry-After.
	Wait time.Duration
	// Delay, on a throttled failure, is how long to hold its reply: the
	// Guard's Delay. A RESP server delays -WRONGPASS by it.
	Delay time.Duration
}

// Fail records a failed authentication from addr (a net.Addr's String or
// an HTTP RemoteAddr: host:port or a bare host) over protocol p, and says
// whether it is throttled.
func (g *Guard) Fail(p Protocol, addr string) Verdict {
	g.failures[p].Add(1)
	burst, interval := g.Burst, g.Interval
	if burst <= 0 {
		burst = DefaultBurst
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	delay := g.Delay
	if delay <= 0 {
		delay = DefaultDelay
	}
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	key := addrKey(addr)
	t := now()

	g.mu.Lock()
	e := g.entry(key, t)
	if !e.tat.After(t) { // the allowance is back in full: a new burst
		e.tat, e.failures, e.throttled = t, 0, false
	}
	e.failures++
	next := e.tat.Add(interval)
	tolerance := time.Duration(burst) * interval
	var v Verdict
	var report int64
	if !e.throttled && next.Sub(t) <= tolerance {
		e.tat = next
	} else {
		v = Verdict{Throttled: true, Wait: max(e.tat.Sub(t), interval), Delay: delay}
		if !e.throttled {
			e.throttled, report = true, e.failures
		}
	}
	g.mu.Unlock()

	if v.Throttled {
		g.throttled[p].Add(1)
		if report > 0 && g.OnBurst != nil {
			g.OnBurst(key.String(), p, report)
		}
	}
	return v
}

// entry returns key's entry, making room for it when MaxAddrs are held;
// g.mu is held.
func (g *Guard) entry(key netip.Prefix, now time.Time) *entry {
	if e := g.addrs[key]; e != nil {
		return e
	}
	limit := g.MaxAddrs
	if limit <= 0 {
		limit = DefaultMaxAddrs
	}
	if g.addrs == nil {
		g.addrs = make(map[netip.Prefix]*entry)
	}
	if len(g.addrs) >= limit {
		// Entries whose allowance is back in full are the same as no
		// entry: drop them. If that frees too little, drop an eighth of
		// the rest, whichever the map yields: those addresses get a fresh
		// allowance, which costs an attacker a burst of its own per
		// eviction, never a legitimate client its way in; and the walk
		// runs once per limit/8 new addresses, not once per address.
		for k, e := range g.addrs {
			if !e.tat.After(now) {
				delete(g.addrs, k)
			}
		}
		for k := range g.addrs {
			if len(g.addrs) <= limit-max(limit/8, 1) {
				break
			}
			delete(g.addrs, k)
		}
	}
	e := &entry{tat: now}
	g.addrs[key] = e
	return e
}

// Failures returns the failed authentications recorded over p.
func (g *Guard) Failures(p Protocol) int64 { return g.failures[p].Load() }

// Throttled returns the failures over p that were past their address's
// allowance.
func (g *Guard) Throttled(p Protocol) int64 { return g.throttled[p].Load() }

// addrKey returns the prefix failures from addr are counted under: the
// IP, or an IPv6 address's /64. Anything that is not an IP (a Unix
// socket's address, say) is counted under one key.
func addrKey(addr string) netip.Prefix {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	ip = ip.Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}
