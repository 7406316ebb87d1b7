package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter/bench"
)

// pageInfo is what the page says besides the runs.
type pageInfo struct {
	fsync   string // "p50 1.2 ms, p99 3.4 ms"
	command string
	charts  string     // the charts' directory, relative to the page
	failed  [][]string // runs that failed: workload, title, command, error
}

func writePage(w *bytes.Buffer, ws []*workload, notes map[string]note, info pageInfo) {
	fmt.Fprint(w, `# Benchmarks

<!-- Written by scripts/bench-all.sh (cmd/benchdoc): edit those, or cmd/benchdoc/notes.md, never this page. -->

`)
	fmt.Fprintf(w, "Measured %s by `%s`, every workload on every store with the peers a user\n", time.Now().UTC().Format("2006-01-02"), info.command)
	fmt.Fprint(w, `would run instead, in one session on the machine below. Regenerate the page with
`+"`scripts/bench-all.sh`"+` (10 s runs over 1,000,000 counters, the better part of an hour) or
`+"`scripts/bench-all.sh --quick`"+` (2 s runs over 100,000 counters, about ten minutes on a laptop).

The machine is shared and noisy: absolute figures move between sessions by more than the
differences that matter. Read **ratios within one table**: every run of a table shares the
session, the clients (64, one request in flight each) and the duration. A write is counted
once it is acknowledged durable (synced to disk, or committed by the server); every run reads
its counters back and `+"`ok`"+` says the values equal the acknowledged writes. The Redis peers run
with the append-only file on (`+"`appendfsync always`"+`, the setting that matches our
acknowledgement, and `+"`everysec`"+`); the PostgreSQL peer is a plain `+"`UPDATE`"+` of one row per
counter with `+"`synchronous_commit=on`"+`.

`)
	writeMachine(w, ws, info)
	writeSummary(w, ws)
	writeFailures(w, info.failed)
	for _, wl := range ws {
		writeWorkload(w, wl, notes[wl.name], info)
	}
}

func writeMachine(w *bytes.Buffer, ws []*workload, info pageInfo) {
	m := ws[0].machine
	fmt.Fprint(w, "## Machine\n\n| | |\n|---|---|\n")
	fmt.Fprintf(w, "| CPUs | %d × %s |\n", m.CPUs, orDash(m.CPUModel))
	fmt.Fprintf(w, "| memory | %.1f GiB |\n", float64(m.MemoryBytes)/(1<<30))
	fmt.Fprintf(w, "| kernel | %s |\n", orDash(kernel()))
	fmt.Fprintf(w, "| Go, OS | %s, %s |\n", m.Go, m.OS)
	if info.fsync != "" {
		fmt.Fprintf(w, "| fsync of a 4 KiB write, the stores' disk | %s |\n", info.fsync)
	}
	var loads []float64
	for _, wl := range ws {
		loads = append(loads, wl.machine.LoadAverage)
	}
	fmt.Fprintf(w, "| load average at the start of a workload | %.1f to %.1f |\n", slices.Min(loads), slices.Max(loads))
	// One line per server and settings: the stores', then the peers'.
	seen := map[string]bool{}
	for _, wl := range ws {
		for _, r := range wl.runs {
			label := "store " + r.Store
			if r.Path == bench.PathPeer {
				label = "peers' " + r.Store
			}
			line := fmt.Sprintf("| %s | %s |", label, settings(r.Settings))
			if len(r.Settings) == 0 || seen[line] {
				continue
			}
			seen[line] = true
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintln(w)
}

// writeSummary writes a table of every workload against every store: the
// store's fastest run as a multiple of the workload's first peer (Redis
// INCR with appendfsync always, or its nearest).
func writeSummary(w *bytes.Buffer, ws []*workload) {
	var stores []string
	for _, wl := range ws {
		for _, r := range wl.runs {
			if r.Path != bench.PathPeer && !slices.Contains(stores, r.Store) {
				stores = append(stores, r.Store)
			}
		}
	}
	fmt.Fprint(w, "## Summary\n\nEach store's fastest run of the workload, as a multiple of the workload's first peer, and the path\nthat ran it (engine: the Go library in process; http; resp: the Redis protocol port).\n\n| workload | first peer |")
	for _, s := range stores {
		fmt.Fprintf(w, " %s |", s)
	}
	fmt.Fprint(w, "\n|---|---|"+strings.Repeat("---:|", len(stores))+"\n")
	for _, wl := range ws {
		peer := firstPeer(wl.runs)
		fmt.Fprintf(w, "| [%s](#%s) | %s |", wl.title, anchor(wl.title), peerCell(peer))
		for _, s := range stores {
			best := bestOf(wl.runs, s)
			switch {
			case best == nil:
				fmt.Fprint(w, " - |")
			case peer == nil:
				fmt.Fprintf(w, " %s/s (%s) |", bench.Thousands(best.OpsPerSec), best.Path)
			default:
				fmt.Fprintf(w, " %s (%s) |", bench.Ratio(best.OpsPerSec, peer.OpsPerSec), best.Path)
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// writeFailures names the runs that failed, with their errors: a store
// missing from a table is explained, not silently absent.
func writeFailures(w *bytes.Buffer, failed [][]string) {
	if len(failed) == 0 {
		return
	}
	fmt.Fprint(w, "## Runs that failed\n\nThese runs stopped with an error, so their store is missing from their workload's table:\n\n")
	for _, f := range failed {
		fmt.Fprintf(w, "- %s: `%s`: %s\n", f[1], f[2], f[3])
	}
	fmt.Fprintln(w)
}

func writeWorkload(w *bytes.Buffer, wl *workload, n note, info pageInfo) {
	fmt.Fprintf(w, "## %s\n\n", wl.title)
	if n.what != "" {
		fmt.Fprintf(w, "%s\n\n", n.what)
	}
	fmt.Fprintf(w, "```sh\n%s\n```\n\n", strings.Join(wl.cmds, "\n"))
	fmt.Fprintf(w, "![%s](%s)\n\n", wl.title, filepath.ToSlash(filepath.Join(info.charts, wl.name+".svg")))
	var peers []bench.Run
	for _, r := range wl.runs {
		if r.Path == bench.PathPeer {
			peers = append(peers, r)
		}
	}
	fmt.Fprint(w, "| run | ops/s | p50 ms | p99 ms | RSS max MiB | ok |")
	for _, p := range peers {
		fmt.Fprintf(w, " × %s |", strings.TrimPrefix(p.Name, "peer/"))
	}
	fmt.Fprint(w, "\n|---|---:|---:|---:|---:|---|"+strings.Repeat("---:|", len(peers))+"\n")
	for _, r := range wl.runs {
		fmt.Fprintf(w, "| %s | %s | %.2f | %.2f | %s | %s |", r.Name, bench.Thousands(r.OpsPerSec), r.P50MS, r.P99MS, rss(r), okText(r))
		for _, p := range peers {
			fmt.Fprintf(w, " %s |", bench.Ratio(r.OpsPerSec, p.OpsPerSec))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	if n.bounds != "" {
		fmt.Fprintf(w, "**What bounds it.** %s\n\n", n.bounds)
	}
}

func firstPeer(runs []bench.Run) *bench.Run {
	for i := range runs {
		if runs[i].Path == bench.PathPeer {
			return &runs[i]
		}
	}
	return nil
}

func bestOf(runs []bench.Run, store string) *bench.Run {
	var best *bench.Run
	for i, r := range runs {
		if r.Path != bench.PathPeer && r.Store == store && (best == nil || r.OpsPerSec > best.OpsPerSec) {
			best = &runs[i]
		}
	}
	return best
}

func peerCell(p *bench.Run) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%s, %s/s", strings.TrimPrefix(p.Name, "peer/"), bench.Thousands(p.OpsPerSec))
}

// anchor is the heading's anchor as GitHub makes it.
func anchor(title string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(title) {
		switch {
		case c == ' ':
			b.WriteByte('-')
		case c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c > 127 && c != '×' && c != '−':
			b.WriteRune(c)
		}
	}
	return b.String()
}

func okText(r bench.Run) string {
	var parts []string
	if r.Errors > 0 {
		parts = append(parts, fmt.Sprintf("%d errors", r.Errors))
	}
	if !r.Verified {
		parts = append(parts, "values differ")
	}
	if r.Refused > 0 {
		parts = append(parts, fmt.Sprintf("%s refused by a bound", bench.Thousands(float64(r.Refused))))
	}
	if len(parts) == 0 {
		return "yes"
	}
	if r.Errors == 0 && r.Verified {
		return "yes, " + strings.Join(parts, ", ")
	}
	return "**" + strings.Join(parts, ", ") + "**"
}

func rss(r bench.Run) string {
	if r.Memory == nil || r.Memory.RSSMax == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f (%s)", float64(r.Memory.RSSMax)/(1<<20), r.Memory.Process)
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func settings(s map[string]string) string {
	var parts []string
	if v, ok := s["version"]; ok {
		parts = append(parts, "version "+v)
	}
	for _, k := range slices.Sorted(maps.Keys(s)) {
		if k != "version" {
			parts = append(parts, "`"+k+"="+s[k]+"`")
		}
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
