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

// fileProbe is a memoryProbe that can also split the resident memory into
// what the process allocated (anonymous pages: the heap, Pebble's memtables
// and block cache, the counters held in memory) and what maps files: the
// executable, and bbolt's database file, which bbolt reads through a
// memory map. File pages are the page cache's, shared and clean (bbolt
// writes with pwrite, not through the map): the kernel drops them under
// memory pressure and reads them again when touched, where anonymous
// memory would have to be swapped. A run that can say so reports both
// parts (Memory.RSSMaxAnon, Memory.RSSMaxFiles).
type fileProbe interface {
	split() (anon, files int64, ok bool)
}

// peakProbe is a memoryProbe whose process keeps its own high-water
// mark of resident memory, which catches a peak between two samples.
// resetPeak starts the mark afresh at the resident memory of the moment
// and reports whether it could: a mark it could not reset spans the
// process's life, not the run, and is not reported.
type peakProbe interface {
	resetPeak() bool
	peak() (int64, bool)
}

// selfMemory is this process, which serves the naive, engine and
// in-process http runs: the figure includes the load generator, which
// keeps a bit per counter and makes ids as it needs them.
type selfMemory struct{}

func (selfMemory) process() string { return "bench" }

func (selfMemory) rss(context.Context) (int64, bool, error) {
	n, ok := statusField(selfStatus(), "VmRSS")
	return n, ok, nil
}

func (selfMemory) split() (anon, files int64, ok bool) {
	status := selfStatus()
	anon, ok1 := statusField(status, "RssAnon")
	files, ok2 := statusField(status, "RssFile")
	return anon, files, ok1 && ok2
}

// resetPeak writes 5 to /proc/self/clear_refs, which resets VmHWM to
// VmRSS (Linux 4.0 and later).
func (selfMemory) resetPeak() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

func (selfMemory) peak() (int64, bool) { return statusField(selfStatus(), "VmHWM") }

// selfStatus returns /proc/self/status, "" where there is none (not
// Linux: no figure).
func selfStatus() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	return string(b)
}

// statusField reads a size in kB, such as VmRSS, from the text of
// /proc/PID/status, in bytes.
func statusField(status, name string) (int64, bool) {
	for line := range strings.Lines(status) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
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
	anon   *int64 // the anonymous part of the sample that set max, when known
	files  *int64 // the mapped files' part of the sample that set max, when known
	peaks  bool   // the probe's high-water mark was reset as the run started
}

// sample reads the probe and keeps the figure when it is the largest yet.
func (s *memorySampler) sample(ctx context.Context) (int64, bool, error) {
	n, ok, err := s.probe.rss(ctx)
	if err != nil || !ok {
		return n, ok, err
	}
	var anon, files *int64
	if p, can := s.probe.(fileProbe); can {
		if a, f, ok := p.split(); ok {
			anon, files = &a, &f
			// The split is read after the total, and memory may grow in
			// between: the sample's total is at least its parts.
			n = max(n, a+f)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n >= s.max {
		s.max, s.anon, s.files = n, anon, files
	}
	return n, true, nil
}

// startSampler reads the memory before the run and starts sampling. It
// returns nil, and no error, when the probe has no figure.
func startSampler(ctx context.Context, p memoryProbe) (*memorySampler, error) {
	s := &memorySampler{probe: p, done: make(chan struct{})}
	if pp, can := p.(peakProbe); can {
		s.peaks = pp.resetPeak()
	}
	n, ok, err := s.sample(ctx)
	if err != nil {
		return nil, fmt.Errorf("memory of the %s process: %w", p.process(), err)
	}
	if !ok {
		return nil, nil
	}
	s.before = n
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
				s.sample(ctx) //nolint:errcheck // see above
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
	after, ok, err := s.sample(ctx)
	if err != nil || !ok {
		return nil
	}
	var peak int64
	if s.peaks {
		if n, ok := s.probe.(peakProbe).peak(); ok {
			peak = max(n, s.max)
		}
	}
	return &Memory{
		Process:     s.probe.process(),
		RSSBefore:   s.before,
		RSSMax:      s.max,
		RSSMaxAnon:  s.anon,
		RSSMaxFiles: s.files,
		RSSPeak:     peak,
		RSSAfter:    after,
		SampleEvery: sampleEvery.String(),
	}
}
