package model_test

import (
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
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
