package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// memoryProbe reads the resident memory of the process serving a run.
// ok is false when that process does not say (a server without
// /metrics, a platform without /proc): the run then has no figure.
type memoryProbe interface {
	rss(ctx context.Context) (bytes int64, ok bool, err error)
	process() string // what was measured, as Memory.Process says it
}

// selfMemory is this process, which serves the naive, engine and
// in-process http runs: the figure includes the load generator, which
// keeps a bit per counter and makes ids as it needs them.
type selfMemory struct{}

func (selfMemory) process() string { return "bench" }

func (selfMemory) rss(context.Context) (int64, bool, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false, nil // not Linux: no figure
	}
	n, ok := statusRSS(string(b))
	return n, ok, nil
}

// statusRSS reads VmRSS from the text of /proc/PID/status.
func statusRSS(status string) (int64, bool) {
	for line := range strings.Lines(status) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb * 1024, true
				}
			}
		}
	}
	return 0, false
}

// sampleEvery is how often a run's memory is sampled for its maximum.
const sampleEvery = 250 * time.Millisecond

// memorySampler reads a probe at the start, every sampleEvery, and at
// the end of a run.
type memorySampler struct {
	probe  memoryProbe
	before int64
	done   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	max    int64
}

// startSampler reads the memory before the run and starts sampling. It
// returns nil, and no error, when the probe has no figure.
func startSampler(ctx context.Context, p memoryProbe) (*memorySampler, error) {
	n, ok, err := p.rss(ctx)
	if err != nil {
		return nil, fmt.Errorf("memory of the %s process: %w", p.process(), err)
	}
	if !ok {
		return nil, nil
	}
	s := &memorySampler{probe: p, before: n, max: n, done: make(chan struct{})}
	s.wg.Go(func() {
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-tick.C:
				// A failed sample only misses a maximum; the end's read
				// reports errors.
				if n, ok, err := p.rss(ctx); err == nil && ok {
					s.mu.Lock()
					s.max = max(s.max, n)
					s.mu.Unlock()
				}
			}
		}
	})
	return s, nil
}

// stop ends the sampling and returns the figures, with the memory after
// the run; nil when the end's read fails.
func (s *memorySampler) stop(ctx context.Context) *Memory {
	if s == nil {
		return nil
	}
	close(s.done)
	s.wg.Wait()
	after, ok, err := s.probe.rss(ctx)
	if err != nil || !ok {
		return nil
	}
	return &Memory{
		Process:     s.probe.process(),
		RSSBefore:   s.before,
		RSSMax:      max(s.max, after),
		RSSAfter:    after,
		SampleEvery: sampleEvery.String(),
	}
}
