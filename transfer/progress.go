package transfer

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Progress reports long work on a writer (stderr): on a terminal one line
// redrawn in place with the items done, the rate and, when the total is
// known, the time left; otherwise a plain line every Interval, so that
// logs get a line now and then rather than a stream of carriage returns.
// Done prints the summary line. A nil *Progress reports nothing. Add is
// safe for concurrent use.
//
// It is a few lines of the standard library rather than a progress bar
// package: a count, a rate and an eta need no more.
type Progress struct {
	what     string // "counters", "keys"
	w        io.Writer
	terminal bool
	total    int64 // 0: unknown
	interval time.Duration
	start    time.Time
	done     atomic.Int64
	fraction atomic.Pointer[func() float64]
	stop     chan struct{}
	wg       sync.WaitGroup
}

// NewProgress starts reporting on w; terminal says whether w is a
// terminal, total is the expected count or 0.
func NewProgress(w io.Writer, what string, terminal bool, total int64) *Progress {
	p := &Progress{what: what, w: w, terminal: terminal, total: total, interval: 5 * time.Second, start: time.Now(), stop: make(chan struct{})}
	if terminal {
		p.interval = 200 * time.Millisecond
	}
	p.wg.Add(1)
	go p.loop()
	return p
}

// SetFraction gives the share of the work done, 0 to 1, when the items'
// total is not known but another measure is (the bytes of a file read):
// the eta follows from it.
func (p *Progress) SetFraction(f func() float64) {
	if p != nil {
		p.fraction.Store(&f)
	}
}

// Add counts n more items done.
func (p *Progress) Add(n int64) {
	if p != nil {
		p.done.Add(n)
	}
}

func (p *Progress) loop() {
	defer p.wg.Done()
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.print()
		}
	}
}

func (p *Progress) print() {
	n := p.done.Load()
	el := time.Since(p.start)
	rate := float64(n) / el.Seconds()
	line := fmt.Sprintf("%d %s, %.0f/s, %s", n, p.what, rate, el.Round(time.Second))
	if p.total > 0 && rate > 0 && n <= p.total {
		eta := time.Duration(float64(p.total-n) / rate * float64(time.Second))
		line = fmt.Sprintf("%d/%d %s (%.0f%%), %.0f/s, eta %s", n, p.total, p.what, 100*float64(n)/float64(p.total), rate, eta.Round(time.Second))
	}
	if f := p.fraction.Load(); f != nil && p.total == 0 {
		if x := (*f)(); x > 0 && x <= 1 {
			eta := time.Duration(float64(el) * (1 - x) / x)
			line = fmt.Sprintf("%d %s (%.0f%%), %.0f/s, eta %s", n, p.what, 100*x, rate, eta.Round(time.Second))
		}
	}
	if p.terminal {
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

// Done stops the reports and prints the summary line: what was done, in
// how long, at what rate, and extra (conflicts, drift) when not empty.
func (p *Progress) Done(verb, extra string) {
	if p == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
	if p.terminal {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	n := p.done.Load()
	el := time.Since(p.start)
	line := fmt.Sprintf("%s %d %s in %s (%.0f/s)", verb, n, p.what, el.Round(time.Millisecond), float64(n)/max(el.Seconds(), 1e-9))
	if extra != "" {
		line += ", " + extra
	}
	fmt.Fprintln(p.w, line)
}
