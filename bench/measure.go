package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
)

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// round is one round trip of a client: one operation, or a pipeline.
type round func(ctx context.Context) tally

// tally is what a round trip's operations came to.
type tally struct {
	reads, writes, refused, errors int64
	delta                          int64 // what the writes that changed a value added up to
}

func (t *tally) add(op *operation) {
	switch {
	case op.err == nil && op.kind == opWrite:
		t.writes++
		if op.changed {
			t.delta += op.delta
		}
	case op.err == nil:
		t.reads++
	case errors.Is(op.err, shardcounter.ErrOutOfRange):
		t.refused++
	default:
		t.errors++
	}
}

func (t tally) answered() int64 { return t.reads + t.writes + t.refused }

// Measurement is what Measure observed.
type Measurement struct {
	Ops       int64           // operations answered: reads, writes and refused writes
	Reads     int64           // of which reads
	Writes    int64           // of which acknowledged writes
	Refused   int64           // of which writes refused as out of range
	Delta     int64           // what the acknowledged writes added to the values
	Errors    int64           // operations that failed
	Elapsed   time.Duration   // from the start to the last operation's end
	Latencies []time.Duration // of the round trips with an answered operation, sorted
}

// OpsPerSec is the throughput of answered operations.
func (m *Measurement) OpsPerSec() float64 {
	if m.Elapsed <= 0 {
		return 0
	}
	return float64(m.Ops) / m.Elapsed.Seconds()
}

// Percentile returns the latency below or at which a fraction p (0 < p ≤
// 1) of the answered round trips finished (nearest rank), or 0 when there
// were none.
func (m *Measurement) Percentile(p float64) time.Duration {
	n := len(m.Latencies)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(n))) - 1
	return m.Latencies[min(max(rank, 0), n-1)]
}

// Measure runs op from clients goroutines, each calling it again as soon
// as it returns, until d has passed since the start, and times every call.
// Calls in flight at the end finish and count. It returns ctx's error if
// ctx ends first.
func Measure(ctx context.Context, clients int, d time.Duration, fn func(ctx context.Context) error) (*Measurement, error) {
	return measure(ctx, clients, d, func(int) round {
		return func(ctx context.Context) tally {
			if err := fn(ctx); err != nil {
				return tally{errors: 1}
			}
			return tally{writes: 1}
		}
	}, nil)
}

// progressEvery is how often a run reports progress.
const progressEvery = 500 * time.Millisecond

// clientCount is one client's count of answered operations, padded to its
// own cache line so that the progress line costs the clients no sharing.
type clientCount struct {
	n atomic.Int64
	_ [56]byte
}

func measure(ctx context.Context, clients int, d time.Duration, newRound func(client int) round, progress func(time.Duration, int64)) (*Measurement, error) {
	if clients < 1 {
		return nil, fmt.Errorf("bench: %d clients: give 1 or more", clients)
	}
	lat := make([][]time.Duration, clients)
	tallies := make([]tally, clients)
	counts := make([]clientCount, clients)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for c := range clients {
		fn := newRound(c)
		wg.Go(func() {
			samples := make([]time.Duration, 0, 1024)
			var sum tally
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				n := fn(ctx)
				counts[c].n.Add(n.answered() + n.errors)
				sum.reads += n.reads
				sum.writes += n.writes
				sum.refused += n.refused
				sum.errors += n.errors
				sum.delta += n.delta
				if n.answered() > 0 {
					samples = append(samples, time.Since(t0))
				}
			}
			lat[c], tallies[c] = samples, sum
		})
	}
	if progress != nil {
		stop := make(chan struct{})
		var pw sync.WaitGroup
		pw.Go(func() {
			tick := time.NewTicker(progressEvery)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					var n int64
					for i := range counts {
						n += counts[i].n.Load()
					}
					progress(time.Since(start), n)
				}
			}
		})
		defer func() { close(stop); pw.Wait() }()
	}
	wg.Wait()
	m := &Measurement{Elapsed: time.Since(start)}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for c := range clients {
		m.Latencies = append(m.Latencies, lat[c]...)
		t := tallies[c]
		m.Reads += t.reads
		m.Writes += t.writes
		m.Refused += t.refused
		m.Errors += t.errors
		m.Delta += t.delta
	}
	m.Ops = m.Reads + m.Writes + m.Refused
	slices.Sort(m.Latencies)
	return m, nil
}
