// Command pebbleopen opens a Pebble store, as serve does, and reports how
// long loading its counters took and the memory it holds after: the open
// time and memory figures of docs/PEBBLE.md.
//
//	go run ./cmd/pebbleopen DIR
package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter/pebble"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: pebbleopen DIR")
		os.Exit(2)
	}
	if p := os.Getenv("CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	s, err := pebble.Open(context.Background(), os.Args[1], pebble.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	took := time.Since(start)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("open: %v, %d counters\n", took.Round(time.Millisecond), s.Counters())
	fmt.Printf("go heap in use: %.1f MiB\n", float64(ms.HeapInuse)/(1<<20))
	status, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(status)) {
		if strings.HasPrefix(line, "VmRSS") || strings.HasPrefix(line, "RssAnon") || strings.HasPrefix(line, "RssFile") {
			fmt.Print(line)
		}
	}
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
