package pebble_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestCrashMidBatch: SIGKILL mid-batch, then the directory opened again:
// every acknowledged batch is there, the one in flight whole or absent.
func TestCrashMidBatch(t *testing.T) {
	storetest.RunCrashMidBatch(t, storetest.Crash{
		Env:     "SHARDCOUNTER_PEBBLE_CRASH",
		Target:  func(t *testing.T) string { return filepath.Join(t.TempDir(), "pebble") },
		Batches: 30,
		Open: func(tb testing.TB, path string) shardcounter.CounterStore {
			s, err := pebble.Open(context.Background(), path, pebble.Options{})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { s.Close() })
			return s
		},
	})
}
