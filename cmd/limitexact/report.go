package main

// The windows of a run: which window each answer counts in, the table
// of them, and the checks on them.

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// window is what one window of the limit saw.
type window struct {
	start                  time.Time
	admitted, refused      int
	dupAllowed, dupRefused int // answers marked duplicate
	retried                int // takes sent again after their server died
	remaining              map[int64]int
	sameRemaining          []*take // admitted takes whose remaining another one also answered
	byRemaining            map[int64]*take
	minRemaining           int64
}

// windowOf returns the start of the window a fresh answer was decided in,
// and how far (in ms) the estimate of its end was from a multiple of the
// period.
func (r *runner) windowOf(t *take) (time.Time, float64) {
	mid := t.sent.Add(t.got.Sub(t.sent) / 2)
	end := mid.Add(time.Duration(t.res.ResetAfterMS) * time.Millisecond)
	p := period.Nanoseconds()
	n := int64(math.Round(float64(end.UnixNano()) / float64(p)))
	off := float64(end.UnixNano()-n*p) / 1e6
	return time.Unix(0, (n-1)*p), off
}

// localWindow returns the window holding t on this machine's clock.
func localWindow(t time.Time) time.Time {
	p := period.Nanoseconds()
	return time.Unix(0, t.UnixNano()/p*p)
}

// report prints the table of windows and checks them.
func (r *runner) report(takes []*take) bool {
	ok := true
	ws := map[time.Time]*window{}
	get := func(s time.Time) *window {
		w := ws[s]
		if w == nil {
			w = &window{start: s, remaining: map[int64]int{}, minRemaining: *quota, byRemaining: map[int64]*take{}}
			ws[s] = w
		}
		return w
	}
	var maxOff float64
	ambiguous := 0
	var dups []*take
	for _, t := range takes {
		if t.res.Duplicate {
			dups = append(dups, t)
			continue
		}
		s, off := r.windowOf(t)
		maxOff = math.Max(maxOff, math.Abs(off))
		w := get(s)
		if t.res.Allowed {
			w.admitted++
			w.remaining[t.res.Remaining]++
			if o := w.byRemaining[t.res.Remaining]; o != nil {
				if w.remaining[t.res.Remaining] == 2 {
					w.sameRemaining = append(w.sameRemaining, o)
				}
				w.sameRemaining = append(w.sameRemaining, t)
			}
			w.byRemaining[t.res.Remaining] = t
			w.minRemaining = min(w.minRemaining, t.res.Remaining)
		} else {
			w.refused++
		}
		if t.retried {
			w.retried++
		}
	}
	// A duplicate answer's first attempt was decided, its answer lost:
	// between its sending and the server's death (a few ms after the
	// kill at most). When that spans a window's edge, it counts in the
	// later window whose store count lacks it, else in the earlier.
	for _, t := range dups {
		w := get(localWindow(t.first))
		if !r.killedAt.IsZero() {
			if later := get(localWindow(r.killedAt.Add(100 * time.Millisecond))); later != w {
				ambiguous++
				if t.res.Allowed && *quota-later.minRemaining > int64(later.admitted) {
					w = later
				}
			}
		}
		if t.res.Allowed {
			w.dupAllowed++
			w.admitted++
		} else {
			w.dupRefused++
			w.refused++
		}
		if t.retried {
			w.retried++
		}
	}
	var starts []time.Time
	for s := range ws {
		starts = append(starts, s)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	fmt.Println("| window start (UTC) | whole in the run | admitted | refused | duplicates (allowed/refused) | sent again after the kill | store's count | server killed | check |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, s := range starts {
		w := ws[s]
		full := !s.Before(r.start) && !s.Add(*period).After(r.end)
		charged := *quota - w.minRemaining
		var bad []string
		if int64(w.admitted) > *quota {
			bad = append(bad, "OVER THE LIMIT")
		}
		for rem, n := range w.remaining {
			if n > 1 {
				bad = append(bad, fmt.Sprintf("remaining %d answered %d times", rem, n))
			}
		}
		if charged != int64(w.admitted) {
			bad = append(bad, fmt.Sprintf("store charged %d, admitted %d", charged, w.admitted))
		}
		check := "ok"
		if len(bad) > 0 {
			check = strings.Join(bad, "; ")
			ok = false
		} else if full && int64(w.admitted) < *quota-3 {
			check = fmt.Sprintf("below the target (≥ %d)", *quota-3)
			ok = false
		}
		killed := ""
		if !r.killedAt.IsZero() && localWindow(r.killedAt) == s {
			killed = fmt.Sprintf("yes, at +%.1f s", r.killedAt.Sub(s).Seconds())
		}
		fmt.Printf("| %s | %s | %d | %d | %d/%d | %d | %d | %s | %s |\n", s.UTC().Format("15:04:05"), yesNo(full),
			w.admitted, w.refused, w.dupAllowed, w.dupRefused, w.retried, charged, killed, check)
	}
	for _, s := range starts {
		w := ws[s]
		if len(w.sameRemaining) == 0 {
			continue
		}
		lo, hi := w.sameRemaining[0], w.sameRemaining[0]
		for _, t := range w.sameRemaining {
			if t.sent.Before(lo.sent) {
				lo = t
			}
			if t.got.After(hi.got) {
				hi = t
			}
		}
		fmt.Printf("\nwindow %s: %d admitted takes answered a remaining another one also answered; they were sent from %+.3f s to %+.3f s of the window's start (this machine's clock), answered by %+.3f s",
			s.UTC().Format("15:04:05"), len(w.sameRemaining), lo.sent.Sub(s).Seconds(), hi.sent.Sub(s).Seconds(), hi.got.Sub(s).Seconds())
	}
	fmt.Printf("\nwindows read from reset_after_ms: the estimated ends were at most %.0f ms from a multiple of %v", maxOff, *period)
	if ambiguous > 0 {
		fmt.Printf("; %d duplicate answers had their first attempt sent in the window before the kill's (each counted in the kill's window when its store count lacked one, else in the earlier)", ambiguous)
	}
	fmt.Println()
	if maxOff > float64(period.Milliseconds())/4 {
		fmt.Println("the windows are not clear: the store's clock is far from this machine's")
		ok = false
	}
	return ok
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
