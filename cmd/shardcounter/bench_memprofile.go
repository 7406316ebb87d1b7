package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
)

// writeHeapProfile is bench.Config.AfterLoad for --memprofile: it writes
// the heap profile of run, as its load ends, to --memprofile's file, and
// says on stderr what the Go runtime holds, so that the resident memory
// the run reports can be told apart: the heap's spans in use (live data
// and the garbage the next collection frees, which GOGC lets grow to as
// much again as the live heap), the spans it keeps without using them,
// goroutine stacks, and the rest of the runtime. What is resident beyond
// the runtime's total was allocated outside it (with cgo: Pebble's block
// cache and memtables, which it takes from C's malloc) or maps files.
//
// The profile follows a collection, as go test's -memprofile does, so
// that its in-use figures are the live heap; the figures on stderr are
// read before it, as the load left them.
func (c *benchCommand) writeHeapProfile(run string) error {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	mb := func(b uint64) float64 { return float64(b) / (1 << 20) }
	fmt.Fprintf(c.m.Stderr, "%s: Go heap in use %.1f MiB (live %.1f after a collection, goal %.1f), idle %.1f (returned to the OS %.1f), stacks %.1f, runtime total %.1f MiB; heap profile in %s\n",
		run, mb(m.HeapInuse), mb(after.HeapAlloc), mb(m.NextGC), mb(m.HeapIdle), mb(m.HeapReleased), mb(m.StackSys), mb(m.Sys-m.HeapReleased), c.memProfile)
	err := writeFile(c.memProfile, func(w io.Writer) error { return pprof.Lookup("heap").WriteTo(w, 0) })
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	return nil
}
