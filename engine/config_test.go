package engine_test

import (
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// TestNewRefusesBadConfig checks that a Config New cannot use is an
// invalid_argument error naming the field, not a panic.
func TestNewRefusesBadConfig(t *testing.T) {
	store := MustOpenStore(t)
	for name, cfg := range map[string]engine.Config{
		"Durability":       {Durability: "fsync"},
		"DefaultShards":    {DefaultShards: shardcounter.MaxShards + 1},
		"NegativeShards":   {DefaultShards: -1},
		"MaxBatch":         {MaxBatch: -1},
		"MaxQueued":        {MaxQueued: -5},
		"MaxInFlight":      {MaxInFlight: -2},
		"FlushTimeout":     {FlushTimeout: -time.Second},
		"NegativeInterval": {FlushInterval: -time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := engine.New(store, cfg)
			if shardcounter.ErrorCode(err) != shardcounter.EINVALID || e != nil {
				t.Fatalf("New(%+v) = %v, %v; want nil and invalid_argument", cfg, e, err)
			}
		})
	}
	for name, cfg := range map[string]engine.Config{"Zero": {}, "Async": {Durability: engine.Async, DefaultShards: 1}} {
		t.Run(name, func(t *testing.T) {
			MustNew(t, store, cfg)
		})
	}
}
