package pebble_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// BenchmarkHotWindowTake is a take of one hot fixed-window key a batch
// (the HTTP bench's limit), after 5000 takes have left their merge
// operands in the memtable: the store's part of a hot key's take.
func BenchmarkHotWindowTake(b *testing.B) {
	ctx := context.Background()
	s := MustOpen(b)
	p := shardcounter.LimitPolicy{Kind: shardcounter.LimitFixed, Limit: 1 << 40, Period: shardcounter.MaxLimitPeriod}.WithDefaults()
	id := shardcounter.LimitKeyID("hot", p, "key")
	incs := []shardcounter.Increment{{Counter: id, Take: &shardcounter.LimitTake{Policy: p, Cost: 1},
		Create: &shardcounter.Spec{Shards: p.StateShards(), Kind: shardcounter.KindSum}}}
	take := func() {
		out, err := s.Apply(ctx, incs)
		if err != nil || out[0].Err != nil || !out[0].Limit.Allowed {
			b.Fatalf("take: %+v, %v", out, err)
		}
	}
	for range 5000 {
		take()
	}
	b.ReportAllocs()
	b.ResetTimer()
	before := cpuTime()
	for range b.N {
		take()
	}
	b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/1e3/float64(b.N), "cpu-µs/take")
}

// cpuTime is the process's user and system CPU time: the CPU of a take,
// which a benchmark's time, mostly the WAL's sync, says little about.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru) //nolint:errcheck // Linux
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
