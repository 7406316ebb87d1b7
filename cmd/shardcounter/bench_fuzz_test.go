package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter/bench"
)

// FuzzBenchFlags parses bench command lines: every one is either a
// usage error or a plan whose workload the bench library accepts, so a
// flag combination the CLI lets through never fails later as a runtime
// error, and no input panics.
func FuzzBenchFlags(f *testing.F) {
	for _, seed := range []string{
		"",
		"--path engine --counters 1000000 --zipf 1.1 --prefill",
		"--store pebble:/tmp/x --path engine --shards 1 --kind distinct --members 1000000 --prefill --memprofile x.prof --cpuprofile y.prof",
		"--workload limit --memprofile x.prof", "--workload ranking --memprofile x.prof", "--memprofile",
		"--workload timeline --read-ratio 0.9 --read-batch 20 --read-consistency strong",
		"--kind distinct --members 1000 --peer redis-sadd --peer-redis redis://127.0.0.1:6379",
		"--min 0 --window 1m:1d --decr-ratio 0.5 --shards 1",
		"--path resp --resp 127.0.0.1:6380 --pipeline 16 --peer redis-incr --peer-redis redis://x:1",
		"--min 1", "--max -1", "--window 1s:1d", "--read-batch 1001 --workload timeline", "--pipeline 0",
		"--workload ranking --counters 100000 --last 1h --peer redis-zset --peer-redis redis://h:1",
		"--workload ranking --shards 1", "--workload ranking --last 90s", "--workload ranking --counters 1",
		"--workload limit --store pebble:/tmp/x --clients 64 --duration 10s --peer-redis redis://h:1 --json x.json --cpuprofile x.prof",
		"--workload limit --shards 1", "--workload limit --clients 0", "--workload limit --peer-redis postgres://x", "--workload limit --store nope",
		"--zipf NaN", "--max-staleness 10s --cache-size 1000000", "--max-staleness -1s", "--cache-size -5", "--decr-ratio Inf", "--resp :0 --path resp", "--kind distinct --min 0", "--kind sum --kind distinct --peer redis-incr --peer redis-sadd --peer-redis redis://h:1",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, ok := parseOrUsage(t, "bench", line)
		if !ok {
			return
		}
		c := m.cmd.(*benchCommand)
		if c.workload == bench.WorkloadRanking {
			cfg, err := c.rankingConfig(m.args)
			if isUsage(t, "rankingConfig", line, err) && (cfg.Counters < 2 || cfg.Clients < 1 || cfg.Duration <= 0 || cfg.Last < 0) {
				t.Fatalf("rankingConfig(%q) passed %+v, which bench.Ranking refuses", line, cfg)
			}
			return
		}
		if c.workload == bench.WorkloadLimit {
			cfg, err := c.limitConfig(m.args)
			if isUsage(t, "limitConfig", line, err) && (cfg.Clients < 1 || cfg.Duration <= 0) {
				t.Fatalf("limitConfig(%q) passed %+v, which bench.Limits refuses", line, cfg)
			}
			return
		}
		p, err := c.plan(m.args)
		if !isUsage(t, "plan", line, err) {
			return
		}
		if err := p.cfg.Validate(); err != nil {
			t.Fatalf("plan(%q) passed a workload the bench refuses: %v", line, err)
		}
	})
}

// parseOrUsage parses the flags of subcommand cmd in line, as a fuzz
// target gives them: it reports whether they parsed, and fails t unless
// a refusal is a usage error (or the request for help).
func parseOrUsage(t *testing.T, cmd, line string) (*Main, bool) {
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	err := m.ParseFlags(context.Background(), append([]string{cmd}, strings.Fields(line)...))
	if errors.Is(err, errHelp) {
		return nil, false
	}
	return m, isUsage(t, "ParseFlags", line, err)
}

// isUsage reports whether err is nil, and fails t unless a non-nil err is
// a usage error: what a command's check of its flags may return.
func isUsage(t *testing.T, step, line string, err error) bool {
	if err == nil {
		return true
	}
	var u *usageError
	if !errors.As(err, &u) {
		t.Fatalf("%s(%q) = %v, want a usage error", step, line, err)
	}
	return false
}
