package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// measureFsync writes 4 KiB and syncs it (fdatasync, as the stores' logs
// do) 200 times in a file under dir, and returns the latency's median and
// 99th percentile: the floor under every durable write on this disk.
func measureFsync(dir string) (string, error) {
	f, err := os.CreateTemp(dir, "fsync-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	var took []time.Duration
	for i := range 200 {
		start := time.Now()
		if _, err := f.WriteAt(buf, int64(i)*4096); err != nil {
			return "", err
		}
		if err := datasync(f); err != nil {
			return "", fmt.Errorf("fsync in %s: %w", filepath.Dir(f.Name()), err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return fmt.Sprintf("p50 %.2f ms, p99 %.2f ms (200 syncs)", ms(took[len(took)/2]), ms(took[len(took)*99/100])), nil
}
