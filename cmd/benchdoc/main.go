// Command benchdoc writes docs/BENCHMARKS.md, the whole page, from the
// `shardcounter bench --json` reports of one scripts/bench-all.sh session:
// the machine (with the fsync latency of the disk the stores ran on), a
// summary, and per workload the commands, a chart, one table of every
// store's runs and the peers' with the ratios to each peer, and a short
// paragraph on what bounds the figures (notes.md, kept beside this file:
// the only hand-written part, saying how things are, not how they went).
//
//	benchdoc -manifest runs.tsv -doc docs/BENCHMARKS.md -charts docs/bench -fsync-dir DIR -command "scripts/bench-all.sh --quick"
//
// The manifest has one line a bench run: workload, title, command, JSON
// report, separated by tabs; lines of one workload are its stores' runs
// and its peers', in order.
package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/shardcounter/shardcounter/bench"
)

//go:embed notes.md
var notesText string

// workload is one section of the page: every run measured for it.
type workload struct {
	name, title string
	cmds        []string
	runs        []bench.Run
	machine     bench.Machine
}

func main() {
	manifest := flag.String("manifest", "", "the `FILE` of runs: workload, title, command, JSON report, tab-separated, one run a line")
	doc := flag.String("doc", "docs/BENCHMARKS.md", "the page to write")
	charts := flag.String("charts", "docs/bench", "the `DIR` of the charts, one SVG a workload")
	fsyncDir := flag.String("fsync-dir", "", "measure the fsync latency of the disk holding this `DIR` (where the stores ran)")
	failures := flag.String("failures", "", "a `FILE` of runs that failed: workload, title, command, error, tab-separated; the page names them")
	command := flag.String("command", "scripts/bench-all.sh", "the command that measured the runs, as the page names it")
	flag.Parse()
	if *manifest == "" {
		fmt.Fprintln(os.Stderr, "benchdoc: give -manifest, the runs to write up (scripts/bench-all.sh makes it)")
		os.Exit(2)
	}
	if err := run(*manifest, *failures, *doc, *charts, *fsyncDir, *command); err != nil {
		fmt.Fprintln(os.Stderr, "benchdoc:", err)
		os.Exit(1)
	}
}

func run(manifest, failuresFile, doc, charts, fsyncDir, command string) error {
	ws, err := readManifest(manifest)
	if err != nil {
		return err
	}
	var failed [][]string
	if failuresFile != "" {
		if failed, err = readFailures(failuresFile); err != nil {
			return err
		}
	}
	notes, err := parseNotes(notesText)
	if err != nil {
		return err
	}
	var fsync string
	if fsyncDir != "" {
		if fsync, err = measureFsync(fsyncDir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(charts, 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(doc), charts)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if err := writeChart(filepath.Join(charts, w.name+".svg"), w); err != nil {
			return err
		}
	}
	var page bytes.Buffer
	writePage(&page, ws, notes, pageInfo{fsync: fsync, command: command, charts: rel, failed: failed})
	page.WriteString(keptTail(doc))
	return os.WriteFile(doc, page.Bytes(), 0o644)
}

// sectionMarker begins each part of the page that a script other than
// bench-all.sh writes (scripts/pagesection.py): benchdoc keeps them as they
// are, from the first to the end, so that each script can rewrite its own
// part alone.
const sectionMarker = "<!-- Written by scripts/"

// keptTail returns the page's part from its first script section to its
// end, after a blank line, or "" when the page or the sections are not
// there. The page's own first line, bench-all.sh's, is not a section.
func keptTail(doc string) string {
	b, err := os.ReadFile(doc)
	if err != nil {
		return ""
	}
	text := string(b)
	for at := 0; ; {
		i := strings.Index(text[at:], "\n"+sectionMarker)
		if i < 0 {
			return ""
		}
		at += i + 1
		if !strings.HasPrefix(text[at:], sectionMarker+"bench-all.sh") {
			return "\n" + text[at:]
		}
	}
}

// readFailures reads the runs that failed: workload, title, command and
// the error, one a line.
func readFailures(path string) ([][]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for n, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		parts := strings.Split(line, "\t")
		if len(parts) != 4 {
			return nil, fmt.Errorf("%s:%d: want workload, title, command and error, tab-separated", path, n+1)
		}
		out = append(out, parts)
	}
	return out, nil
}

// readManifest reads the runs of every workload, in the manifest's order.
func readManifest(path string) ([]*workload, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ws []*workload
	byName := map[string]*workload{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		parts := strings.Split(sc.Text(), "\t")
		if len(parts) != 4 {
			return nil, fmt.Errorf("%s:%d: want workload, title, command and report, tab-separated", path, n)
		}
		w := byName[parts[0]]
		if w == nil {
			w = &workload{name: parts[0], title: parts[1]}
			byName[w.name] = w
			ws = append(ws, w)
		}
		b, err := os.ReadFile(parts[3])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		var r bench.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", parts[3], err)
		}
		w.cmds = append(w.cmds, parts[2])
		w.runs = append(w.runs, r.Runs...)
		w.machine = r.Machine
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ws) == 0 {
		return nil, fmt.Errorf("%s: no runs", path)
	}
	return ws, nil
}

func writeChart(path string, w *workload) error {
	var b bytes.Buffer
	if err := bench.WriteBars(&b, w.title, w.runs); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// note is what notes.md says of a workload: what it measures and what
// bounds it.
type note struct{ what, bounds string }

// parseNotes reads notes.md: a "## NAME" heading a workload, then a
// paragraph of what it measures and one starting "Bound:" of what
// bounds it.
func parseNotes(text string) (map[string]note, error) {
	notes := map[string]note{}
	var name string
	var paras []string
	flush := func() error {
		if name == "" {
			return nil
		}
		var n note
		for _, p := range paras {
			if b, ok := strings.CutPrefix(p, "Bound: "); ok {
				n.bounds = b
			} else {
				n.what = strings.TrimSpace(n.what + " " + p)
			}
		}
		if n.what == "" || n.bounds == "" {
			return fmt.Errorf("notes.md: workload %q needs a paragraph of what it measures and one starting \"Bound: \"", name)
		}
		notes[name] = n
		return nil
	}
	for _, block := range strings.Split(text, "\n\n") {
		block = strings.TrimSpace(block)
		if h, ok := strings.CutPrefix(block, "## "); ok {
			if err := flush(); err != nil {
				return nil, err
			}
			name, paras = strings.TrimSpace(h), nil
			continue
		}
		if block != "" && name != "" {
			paras = append(paras, strings.Join(strings.Fields(block), " "))
		}
	}
	return notes, flush()
}
