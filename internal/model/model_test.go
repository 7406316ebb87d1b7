package model_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/decide"
	"github.com/shardcounter/shardcounter/internal/model"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestCounterStore holds the model to the contract's suite: where they
// disagree, the model is read against the contract and fixed.
func TestCounterStore(t *testing.T) {
	s := model.New(model.Options{})
	storetest.RunCounterStore(t, func(testing.TB) shardcounter.CounterStore { return s }, storetest.Options{
		OpenWithClock: func(_ testing.TB, now func() time.Time) shardcounter.CounterStore {
			return model.New(model.Options{Now: now})
		},
		Totals: true,
	})
}

func TestRankingStore(t *testing.T) {
	storetest.RunRankingStore(t, model.New(model.Options{}))
}

func TestDedupeWindow(t *testing.T) {
	clk := storetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	storetest.RunDedupeWindow(t, model.New(model.Options{Now: clk.Now, DedupeWindow: time.Hour}), time.Hour, clk.Advance)
}

// TestLimitFixedBehind takes from a fixed window's key on a clock that goes
// back across a window's edge, as PostgreSQL's commit times do (a take's
// time is its transaction's start, and it may wait for the key past the
// edge), and checks that the model answers as package decide: a take
// behind the key's window counts in it, so the count never starts again.
func TestLimitFixedBehind(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	clk := storetest.NewClock(base)
	s := model.New(model.Options{Now: clk.Now})
	p, err := shardcounter.ParseLimitPolicy("fixed 3/10s")
	if err != nil {
		t.Fatal(err)
	}
	state := make([]int64, p.StateShards())
	allowed := 0
	for i, at := range []time.Duration{9 * time.Second, 10 * time.Second, 9900 * time.Millisecond, 10 * time.Second, 9900 * time.Millisecond, 10500 * time.Millisecond, 9950 * time.Millisecond} {
		clk.Set(base.Add(at))
		out, err := s.Apply(context.Background(), []shardcounter.Increment{{Counter: "key", Take: &shardcounter.LimitTake{Policy: p, Cost: 1},
			Create: &shardcounter.Spec{Shards: p.StateShards(), Kind: shardcounter.KindSum}}})
		if err != nil || out[0].Err != nil {
			t.Fatalf("take %d: %v, %v", i, err, out[0].Err)
		}
		want, next := decide.Limit(p, state, base.Add(at), 1, false)
		state = next
		if got := *out[0].Limit; got != want {
			t.Errorf("take %d at +%v: the model answers %+v, package decide %+v", i, at, got, want)
		}
		if out[0].Limit.Allowed {
			allowed++
		}
	}
	if allowed != 4 { // 1 in the first window, 3 in the second
		t.Errorf("%d takes allowed, want 4", allowed)
	}
}
