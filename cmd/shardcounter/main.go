// Command shardcounter runs the shardcounter server and talks to it.
//
// Every subcommand has --help. Exit codes: 0 ok, 1 runtime error, 2 usage
// error; errors go to stderr as one line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
)

// subcommands lists every subcommand; adding one is one line here and one
// file that defines its command type.
var subcommands = []subcommand{
	{"serve", "[flags]", "run the HTTP server", newServeCommand},
	{"create", "ID [--shards N] [--kind sum|distinct] [--min V] [--max V] [--window BUCKET:RETENTION] [--ttl D]", "create a counter", newCreateCommand},
	{"incr", "ID [--by N] [--request-id S]", "add to a counter", newIncrCommand},
	{"decr", "ID [--by N] [--request-id S]", "subtract from a counter", newDecrCommand},
	{"get", "ID... [--cached] [--last DURATION]", "print counters' values", newGetCommand},
	{"watch", "ID [--interval D]", "print a counter's value and each change of it, live", newWatchCommand},
	{"series", "ID [--last DURATION] [--bucket B]", "print a windowed counter's sums per time bucket", newSeriesCommand},
	{"shards", "ID", "print each shard's value and the node that holds it", newShardsCommand},
	{"add", "ID MEMBER", "add a member to a distinct counter", newAddCommand},
	{"remove", "ID MEMBER", "remove a member from a distinct counter", newRemoveCommand},
	{"members", "ID [--limit N]", "list a distinct counter's members", newMembersCommand},
	{"reshard", "ID --shards N", "change a counter's shard count, keeping its value", newReshardCommand},
	{"delete", "ID", "delete a counter", newDeleteCommand},
	{"expire", "ID TTL", "give a counter (or a hash) a deadline TTL from now, such as 30s or 1d", newExpireCommand},
	{"ttl", "ID", "print a counter's deadline", newTTLCommand},
	{"persist", "ID", "remove a counter's deadline", newPersistCommand},
	{"reset", "ID [--value N] [--delete]", "set a counter's value (0 by default) or delete it, printing the value before", newResetCommand},
	{"list", "[--prefix P] [--limit N]", "list counters in id order", newListCommand},
	{"rank", "create NAME --prefix P [--last D] [--size N] [--max-staleness D] | list | delete NAME", "define the rankings the server keeps", newRankCommand},
	{"top", "NAME [-k N]", "print the first entries of a ranking", newTopCommand},
	{"limit", "create NAME POLICY | get [NAME] | delete NAME | take NAME KEY [--cost N] [--request-id S] | peek NAME KEY [--cost N] | reset NAME KEY", "define rate limits, and take from their keys", newLimitCommand},
	{"collection", "create NAME --shards N [--timestamp-field F] [--index FIELD]...", "create a time-ordered collection with sharded timestamps", newCollectionCommand},
	{"put", "NAME JSON|- [--id S]", "write one document, or NDJSON documents from stdin", newPutCommand},
	{"query", "NAME [--where FIELD==VALUE] [--after T] [--before T] [--order desc|asc] [--limit N] [--page-token S]", "print a page of a collection's documents by timestamp", newQueryCommand},
	{"bench", "[--store DSN] [--server URL] [--path naive|engine|http|peer]... [--peer redis-incr|postgres-update|http-bare]... [--shards 1,4,16,64] [--clients 64] [--counters 1] [--duration 10s] [--json FILE] [--svg FILE]", "measure throughput against the peers", newBenchCommand},
	{"firestore-indexes", "[--store firestore://PROJECT]", "print the firestore.indexes.json a real Firestore project needs", newFirestoreIndexesCommand},
	{"export", "(--store DSN | --server URL) [--prefix P] [--out FILE]", "write counters and collections as JSON Lines (docs/EXPORT.md)", newExportCommand},
	{"import", "(--store DSN | --server URL) [--in FILE] [--replace]", "read an export into a store, idempotently", newImportCommand},
	{"import-redis", "--from redis://HOST:PORT --match PATTERN (--store DSN | --server URL) [--shards N]", "move a live Redis's integer keys, sets and hashes into counters", newImportRedisCommand},
	{"backup", "--server URL --out PATH", "copy a running server's embedded store, online", newBackupCommand},
	{"verify", "(--store DSN | --server URL) [--prefix P]", "recount counters from shards, members and buckets; exit 1 on drift", newVerifyCommand},
	{"version", "", "print the version", newVersionCommand},
}

// subcommand describes one subcommand for dispatch and help.
type subcommand struct {
	name     string
	synopsis string // the arguments, after the name
	summary  string
	new      func(m *Main) command
}

// command is a subcommand's implementation. flags registers its flags;
// run executes it with the positional arguments left after flags.
type command interface {
	flags(fs *flag.FlagSet)
	run(ctx context.Context, args []string) error
}

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		cancel() // first signal: stop gracefully
		<-signals
		fmt.Fprintln(os.Stderr, "shardcounter: second signal: exiting at once")
		os.Exit(1)
	}()
	os.Exit(NewMain().Exec(ctx, os.Args[1:]))
}

// Main is the program, separate from main so that tests run it in process
// with their own arguments, environment and output buffers.
type Main struct {
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment; tests replace it.
	Getenv func(string) string

	name string   // the subcommand chosen by ParseFlags
	cmd  command  // its implementation, with flags parsed
	args []string // its positional arguments
}

// NewMain returns a Main on the process's stdout, stderr and environment.
func NewMain() *Main {
	return &Main{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errHelp reports that --help was given and its text printed.
var errHelp = errors.New("help printed")

// Exec runs the program with args (without the program name) and returns
// the exit status: ParseFlags, Run, Close, with errors printed as one line.
func (m *Main) Exec(ctx context.Context, args []string) int {
	err := m.ParseFlags(ctx, args)
	if err == nil {
		err = m.Run(ctx)
		if cerr := m.Close(); err == nil {
			err = cerr
		}
	}
	var usage *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &usage):
		if m.name != "" {
			fmt.Fprintf(m.Stderr, "shardcounter %s: %s (see shardcounter %s --help)\n", m.name, oneLine(usage.msg), m.name)
		} else {
			fmt.Fprintf(m.Stderr, "shardcounter: %s (see shardcounter --help)\n", oneLine(usage.msg))
		}
		return 2
	default:
		prefix := "shardcounter"
		if m.name != "" {
			prefix += " " + m.name
		}
		fmt.Fprintf(m.Stderr, "%s: %s\n", prefix, oneLine(errorText(err)))
		return 1
	}
}

// ParseFlags picks the subcommand and parses its flags. Flags may come
// before or after the positional arguments; "--" ends the flags.
func (m *Main) ParseFlags(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("no subcommand given: give one of %s", subcommandNames())
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		m.printUsage(m.Stdout)
		return errHelp
	}
	var sub *subcommand
	for i := range subcommands {
		if subcommands[i].name == args[0] {
			sub = &subcommands[i]
		}
	}
	if sub == nil {
		return usagef("unknown subcommand %q: the subcommands are %s", args[0], subcommandNames())
	}
	m.name = sub.name
	m.cmd = sub.new(m)
	fs := flag.NewFlagSet("shardcounter "+sub.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by Exec, help by printHelp
	m.cmd.flags(fs)
	pos, err := parseInterspersed(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		printHelp(m.Stdout, sub, fs)
		if ex, ok := m.cmd.(exampler); ok {
			fmt.Fprintf(m.Stdout, "\nExamples:\n%s\n", ex.example())
		}
		return errHelp
	}
	if err != nil {
		return usagef("%v", err)
	}
	m.args = pos
	return nil
}

// Run executes the subcommand chosen by ParseFlags. It returns when the
// command is done; for serve, when ctx is cancelled and the server has
// shut down.
func (m *Main) Run(ctx context.Context) error {
	if m.cmd == nil {
		return errors.New("Run called before ParseFlags")
	}
	return m.cmd.run(ctx, m.args)
}

// Close releases what Run left open. Every command closes its own
// resources before Run returns, so there is nothing left today; Close
// exists so that the lifecycle matches the library's Open/Close.
func (m *Main) Close() error { return nil }

// parseInterspersed parses flags anywhere among the positional arguments,
// as in "shardcounter incr likes --by 5", which the flag package alone
// would not: it stops at the first positional argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func (m *Main) printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: shardcounter SUBCOMMAND [ARGS] [FLAGS]")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, s := range subcommands {
		fmt.Fprintf(tw, "  %s\t%s\n", s.name, s.summary)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run shardcounter SUBCOMMAND --help for its flags.")
}

// printHelp prints a subcommand's help, with flags spelled --name as the
// docs spell them.
func printHelp(w io.Writer, sub *subcommand, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: shardcounter %s %s\n\n%s.\n", sub.name, sub.synopsis, upperFirst(sub.summary))
	var lines []string
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		line += "\t" + usage
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			line += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		lines = append(lines, line)
	})
	if len(lines) > 0 {
		fmt.Fprintln(w, "\nFlags:")
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		for _, l := range lines {
			fmt.Fprintln(tw, l)
		}
		tw.Flush()
	}
}

func subcommandNames() string {
	names := make([]string, len(subcommands))
	for i, s := range subcommands {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// oneLine keeps an error message on one line, as SPEC.md asks.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
