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
		"MaxReadsInFlight": {MaxReadsInFlight: -1},
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

// FuzzParseDurability checks that ParseDurability takes exactly "",
// "durable" and "async", and refuses anything else with invalid_argument.
func FuzzParseDurability(f *testing.F) {
	for _, s := range []string{"", "durable", "async", "Durable", "fsync", "async "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := engine.ParseDurability(s)
		switch s {
		case "", "durable":
			if err != nil || d != engine.Durable {
				t.Fatalf("ParseDurability(%q) = %q, %v; want durable", s, d, err)
			}
		case "async":
			if err != nil || d != engine.Async {
				t.Fatalf("ParseDurability(%q) = %q, %v; want async", s, d, err)
			}
		default:
			if shardcounter.ErrorCode(err) != shardcounter.EINVALID || d != "" {
				t.Fatalf("ParseDurability(%q) = %q, %v; want invalid_argument", s, d, err)
			}
		}
	})
}
