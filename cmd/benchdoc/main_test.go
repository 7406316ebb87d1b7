package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter/bench"
)

// TestNotesCoverTheScript: every workload scripts/bench-all.sh runs has
// its paragraphs in notes.md, and notes.md has no workload the script
// does not run.
func TestNotesCoverTheScript(t *testing.T) {
	notes, err := parseNotes(notesText)
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../../scripts/bench-all.sh")
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*workload (\w+) `).FindAllStringSubmatch(string(script), -1) {
		ran[m[1]] = true
		if _, ok := notes[m[1]]; !ok {
			t.Errorf("scripts/bench-all.sh runs %q, which notes.md does not describe", m[1])
		}
	}
	if len(ran) == 0 {
		t.Fatal("found no `workload NAME` lines in scripts/bench-all.sh")
	}
	for name := range notes {
		if !ran[name] {
			t.Errorf("notes.md describes %q, which scripts/bench-all.sh does not run", name)
		}
	}
}

func TestParseNotesRefusesAWorkloadWithoutItsBound(t *testing.T) {
	_, err := parseNotes("## hot\n\nwhat it is\n")
	if err == nil || !strings.Contains(err.Error(), `"hot"`) {
		t.Fatalf("parseNotes = %v, want an error naming the workload", err)
	}
}

// TestPageFitsItsLimit: a page of every workload the script runs on five
// stores stays under 400 lines, and says what a reader needs.
func TestPageFitsItsLimit(t *testing.T) {
	notes, err := parseNotes(notesText)
	if err != nil {
		t.Fatal(err)
	}
	var ws []*workload
	for _, name := range []string{"hot", "million", "timeline", "likes", "bounds", "resp16"} {
		wl := &workload{name: name, title: "Workload " + name, machine: bench.Machine{CPUs: 2, LoadAverage: 1}}
		for _, store := range []string{"pebble", "bolt", "postgres", "redis", "redis+cluster"} {
			for _, path := range []string{"engine", "http", "resp"} {
				for _, shards := range []int{1, 16} {
					wl.runs = append(wl.runs, bench.Run{Name: fmt.Sprintf("%s/%s/shards=%d", store, path, shards), Store: store, Path: path, Shards: shards, OpsPerSec: 1000, Verified: true})
				}
			}
			wl.cmds = append(wl.cmds, "shardcounter bench --store "+store)
		}
		for _, p := range []string{"redis-incr/appendfsync=always", "redis-incr/appendfsync=everysec", "postgres-update"} {
			wl.runs = append(wl.runs, bench.Run{Name: "peer/" + p, Path: bench.PathPeer, OpsPerSec: 500, Verified: true})
		}
		ws = append(ws, wl)
	}
	var b bytes.Buffer
	writePage(&b, ws, notes, pageInfo{fsync: "p50 1 ms", command: "scripts/bench-all.sh --quick", charts: "bench"})
	page := b.String()
	if n := strings.Count(page, "\n"); n >= 400 {
		t.Errorf("the page has %d lines, want under 400", n)
	}
	for _, want := range []string{"scripts/bench-all.sh --quick", "| fsync of a 4 KiB write", "![Workload hot](bench/hot.svg)", "| [Workload likes](#workload-likes) |", "2.00× (engine)", "**What bounds it.**"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

func TestAnchor(t *testing.T) {
	for title, want := range map[string]string{
		"One hot counter: +1 writes":     "one-hot-counter-1-writes",
		"1,000,000 counters, Zipf s=1.1": "1000000-counters-zipf-s11",
	} {
		if got := anchor(title); got != want {
			t.Errorf("anchor(%q) = %q, want %q", title, got, want)
		}
	}
}

// TestKeptTail: the parts other scripts write (bench-doors.sh,
// bench-limit.sh) survive a rewrite of the page, and a page without them
// gains nothing: bench-all.sh's own marker is not one of them.
func TestKeptTail(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if got := keptTail(doc); got != "" {
		t.Fatalf("no page: kept %q", got)
	}
	const (
		head        = "# Benchmarks\n\n<!-- Written by scripts/bench-all.sh (cmd/benchdoc): edit those. -->\n\nold\n\n"
		doorsMarker = "<!-- Written by scripts/bench-doors.sh from here to the next such line or the end. -->"
		limitMarker = "<!-- Written by scripts/bench-limit.sh from here to the next such line or the end. -->"
	)
	tail := doorsMarker + "\n\n## Front doors\n\n| a | b |\n"
	if err := os.WriteFile(doc, []byte(head+tail), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := keptTail(doc), "\n"+tail; got != want {
		t.Fatalf("kept %q, want %q", got, want)
	}
	limit := limitMarker + "\n\n## Rate limits on a hot key\n"
	for _, tail := range []string{tail + "\n" + limit, limit} {
		if err := os.WriteFile(doc, []byte(head+tail), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, want := keptTail(doc), "\n"+tail; got != want {
			t.Fatalf("kept %q, want %q", got, want)
		}
	}
	if err := os.WriteFile(doc, []byte(head), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := keptTail(doc); got != "" {
		t.Fatalf("no marker: kept %q", got)
	}
}
