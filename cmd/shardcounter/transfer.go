package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/dsn"
	"github.com/shardcounter/shardcounter/transfer"
)

// exampler is a command whose --help ends with examples.
type exampler interface{ example() string }

// storeFlags are the flags of the commands that work on a store directly
// (export, import, verify).
type storeFlags struct {
	m      *Main
	store  string
	quiet  bool
	client clientFlags // --server and --token-file, without --store
}

func (c *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.store, "store", c.m.Getenv("SHARDCOUNTER_STORE"), "work on the store `DSN` directly, e.g. pebble:./data or postgres://... (env SHARDCOUNTER_STORE); stop servers that use an embedded store first. Without it, work through the server named by --server")
	fs.BoolVar(&c.quiet, "quiet", false, "print no progress and no summary line")
	c.client.m = c.m
	c.client.registerServer(fs)
}

// open opens the store on clock.
func (c *storeFlags) open(ctx context.Context, clock *transfer.Clock) (shardcounter.CounterStore, error) {
	if c.store == "" {
		return nil, usagef("give --store DSN: the store to work on")
	}
	if _, err := dsn.Scheme(c.store); err != nil {
		return nil, usagef("--store: %s", errorText(err))
	}
	if clock == nil {
		clock = &transfer.Clock{}
	}
	s, err := transfer.OpenStore(ctx, c.store, clock)
	if err != nil {
		return nil, fmt.Errorf("cannot open store %s: %s", dsn.Redact(c.store), errorText(err))
	}
	return s, nil
}

// progress returns the progress report on stderr, nil with --quiet.
func (c *storeFlags) progress(what string) *transfer.Progress {
	if c.quiet {
		return nil
	}
	terminal := false
	if f, ok := c.m.Stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			terminal = true
		}
	}
	return transfer.NewProgress(c.m.Stderr, what, terminal, 0)
}

// exportCommand is `shardcounter export`.
type exportCommand struct {
	storeFlags
	prefix string
	out    string
}

func newExportCommand(m *Main) command { return &exportCommand{storeFlags: storeFlags{m: m}} }

func (c *exportCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.StringVar(&c.prefix, "prefix", "", "export only the counters whose ids start with `P`")
	fs.StringVar(&c.out, "out", "", "write to `FILE` (made anew) instead of stdout")
}

func (c *exportCommand) example() string {
	return `  shardcounter export --store bolt:./shardcounter.db --out counters.jsonl
  shardcounter export --store pebble:./data --prefix post: | gzip > posts.jsonl.gz
The format is docs/EXPORT.md. Stop writes for an exact copy: a live export
is consistent per page of 1000 counters.`
}

func (c *exportCommand) run(ctx context.Context, args []string) error {
	if len(args) != 0 {
		return usagef("export takes no arguments, got %q", args)
	}
	if c.prefix != "" {
		if err := shardcounter.ValidateID(shardcounter.CounterIDKind, c.prefix); err != nil {
			return usagef("--prefix: %s", errorText(err))
		}
	}
	w := c.m.Stdout
	if c.out != "" {
		f, err := os.OpenFile(c.out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("cannot write --out: %w", err)
		}
		defer f.Close()
		w = f
	}
	var st transfer.Stats
	var err error
	p := c.progress("counters")
	if c.store == "" {
		st, err = c.exportServer(ctx, w, p)
	} else {
		var s shardcounter.CounterStore
		if s, err = c.open(ctx, nil); err != nil {
			p.Done("stopped after exporting", "")
			return err
		}
		defer s.Close()
		st, err = transfer.Export(ctx, s, w, transfer.ExportOptions{Prefix: c.prefix, Progress: p})
	}
	if err != nil {
		p.Done("stopped after exporting", "")
		return fmt.Errorf("export: %s", errorText(err))
	}
	if f, ok := w.(*os.File); ok && c.out != "" {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	p.Done("exported", fmt.Sprintf("%d members, %d buckets, %d deadlines, %d rankings, %d collections, %d documents", st.Members, st.Buckets, st.Deadlines, st.Rankings, st.Collections, st.Documents))
	return nil
}

// importCommand is `shardcounter import`.
type importCommand struct {
	storeFlags
	in      string
	replace bool
}

func newImportCommand(m *Main) command { return &importCommand{storeFlags: storeFlags{m: m}} }

func (c *importCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.StringVar(&c.in, "in", "", "read the export from `FILE` instead of stdin")
	fs.BoolVar(&c.replace, "replace", false, "delete a counter that exists with other options and make it again as the export says")
}

func (c *importCommand) example() string {
	return `  shardcounter export --store bolt:./shardcounter.db | shardcounter import --store postgres://app@db/counters
  shardcounter import --store pebble:./data --in counters.jsonl
Importing twice leaves the same state as once: run it again to resume an
import that was cut short. A counter that exists with other options is
reported and left alone unless --replace.`
}

func (c *importCommand) run(ctx context.Context, args []string) error {
	if len(args) != 0 {
		return usagef("import takes no arguments, got %q", args)
	}
	var r io.Reader = os.Stdin
	var size int64
	if c.in != "" {
		f, err := os.Open(c.in)
		if err != nil {
			return fmt.Errorf("cannot read --in: %w", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		r = f
	}
	var st transfer.Stats
	var err error
	p := c.progress("counters")
	if size > 0 {
		cr := &countReader{r: r}
		r = cr
		p.SetFraction(func() float64 { return float64(cr.n.Load()) / float64(size) })
	}
	if c.store == "" {
		st, err = c.importServer(ctx, r)
	} else {
		clock := &transfer.Clock{}
		var s shardcounter.CounterStore
		if s, err = c.open(ctx, clock); err != nil {
			p.Done("stopped after importing", "")
			return err
		}
		defer s.Close()
		st, err = transfer.Import(ctx, s, r, transfer.ImportOptions{Replace: c.replace, Clock: clock, Progress: p, Conflict: c.conflict,
			CollectionConflict: func(name string) {
				fmt.Fprintf(c.m.Stderr, "shardcounter import: collection %s exists with other options: left as it is; --replace makes it again\n", name)
			},
			RankingConflict: c.rankingConflict})
	}
	if err != nil {
		p.Done("stopped after importing", "")
		return fmt.Errorf("import: %s (counters before the last whole batch are in; fix the input and run the import again)", errorText(err))
	}
	p.Done("imported", fmt.Sprintf("%d members, %d buckets, %d deadlines set, %d rankings, %d collections, %d documents, %d conflicts, %d replaced", st.Members, st.Buckets, st.Deadlines, st.Rankings, st.Collections, st.Documents, st.Conflicts, st.Replaced))
	if st.Conflicts > 0 {
		return fmt.Errorf("%d counters, rankings or collections exist with other options and were left alone: see above, or run again with --replace", st.Conflicts)
	}
	return nil
}

// conflict reports a counter the import left alone.
func (c *importCommand) conflict(id string, have, want shardcounter.Spec) {
	fmt.Fprintf(c.m.Stderr, "shardcounter import: counter %s exists with other options (%s; the export has %s): left as it is; --replace makes it again\n", showID(id), specText(have), specText(want))
}

// rankingConflict reports a ranking the import left alone.
func (c *importCommand) rankingConflict(name string, have, want shardcounter.RankingOptions) {
	fmt.Fprintf(c.m.Stderr, "shardcounter import: ranking %s exists with other options (%s; the export has %s): left as it is; --replace makes it again\n", name, rankingText(have), rankingText(want))
}

// rankingText is a ranking's options as `rank create` spells them.
func rankingText(o shardcounter.RankingOptions) string {
	t := fmt.Sprintf("--prefix %q --size %d --max-staleness %s", o.Prefix, o.Size, o.MaxStaleness)
	if o.Last > 0 {
		t += fmt.Sprintf(" --last %s", o.Last)
	}
	return t
}

// specText is a spec as the CLI's create flags spell it.
func specText(s shardcounter.Spec) string {
	t := fmt.Sprintf("--shards %d --kind %s", s.Shards, orSum(s.Kind))
	if s.Min != nil {
		t += fmt.Sprintf(" --min %d", *s.Min)
	}
	if s.Max != nil {
		t += fmt.Sprintf(" --max %d", *s.Max)
	}
	if s.Window != nil {
		t += fmt.Sprintf(" --window %s:%s", s.Window.Bucket, s.Window.Retention)
	}
	return t
}

func orSum(k shardcounter.Kind) shardcounter.Kind {
	if k == "" {
		return shardcounter.KindSum
	}
	return k
}

// verifyCommand is `shardcounter verify`.
type verifyCommand struct {
	storeFlags
	prefix string
}

func newVerifyCommand(m *Main) command { return &verifyCommand{storeFlags: storeFlags{m: m}} }

func (c *verifyCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.StringVar(&c.prefix, "prefix", "", "verify only the counters whose ids start with `P`")
}

func (c *verifyCommand) example() string {
	return `  shardcounter verify --store postgres://app@db/counters
Each drift is a line on stdout; the exit status is 0 when there is none,
1 otherwise. It reads a page of counters at a time and may run while the
store takes writes.`
}

func (c *verifyCommand) run(ctx context.Context, args []string) error {
	if len(args) != 0 {
		return usagef("verify takes no arguments, got %q", args)
	}
	p := c.progress("counters")
	report := func(d transfer.Drift) { fmt.Fprintln(c.m.Stdout, d.String()) }
	var drifts int
	var err error
	if c.store == "" {
		drifts, err = c.verifyServer(ctx, p, report)
	} else {
		var s shardcounter.CounterStore
		if s, err = c.open(ctx, nil); err != nil {
			p.Done("stopped after verifying", "")
			return err
		}
		defer s.Close()
		var ds []transfer.Drift
		_, ds, err = transfer.Verify(ctx, s, transfer.VerifyOptions{Prefix: c.prefix, Progress: p, Drift: report})
		drifts = len(ds)
	}
	if err != nil {
		p.Done("stopped after verifying", "")
		return fmt.Errorf("verify: %s", errorText(err))
	}
	p.Done("verified", fmt.Sprintf("%d drifts", drifts))
	if drifts > 0 {
		return fmt.Errorf("%d counters drift: see the lines above", drifts)
	}
	return nil
}
