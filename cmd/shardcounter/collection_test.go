package main_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	shttp "github.com/shardcounter/shardcounter/http"
)

// RunStdin runs the binary like Run, with stdin.
func RunStdin(tb testing.TB, dir string, env []string, stdin string, args ...string) Result {
	tb.Helper()
	readSources()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			tb.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: code}
}

// instrumentsNDJSON is seed 001's three documents, one a line.
const instrumentsNDJSON = `{"symbol":"AAA","price":{"currency":"USD","micros":34790000},"exchange":"EXCHG1","instrumentType":"commonstock","timestamp":"2019-01-01T13:45:23.010Z"}
{"symbol":"BBB","price":{"currency":"JPY","micros":64272000000},"exchange":"EXCHG2","instrumentType":"commonstock","timestamp":"2019-01-01T13:45:23.101Z"}
{"symbol":"Index1 ETF","price":{"currency":"USD","micros":473000000},"exchange":"EXCHG1","instrumentType":"etf","timestamp":"2019-01-01T13:45:23.001Z"}
`

// TestCollectionCommands runs the seed's example with the CLI, as
// docs/COLLECTIONS.md shows it.
func TestCollectionCommands(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir)
	env := s.Env()

	got := Run(t, dir, env, "collection", "create", "instruments", "--shards", "3",
		"--index", "exchange", "--index", "instrumentType", "--index", "price.currency").MustOK(t)
	if got != "created collection instruments with 3 shards, timestamp field timestamp, indexes exchange, instrumentType, price.currency\n" {
		t.Fatalf("collection create printed %q", got)
	}
	put := RunStdin(t, dir, env, instrumentsNDJSON, "put", "instruments", "-").MustOK(t)
	if lines := strings.Split(strings.TrimSpace(put), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "put ") {
		t.Fatalf("put - printed %q", put)
	}
	got = Run(t, dir, env, "put", "instruments", `{"symbol":"CCC","exchange":"EXCHG3","timestamp":"2019-01-01T13:45:24Z"}`, "--id", "ccc").MustOK(t)
	if !strings.HasPrefix(got, "put ccc on shard ") || !strings.HasSuffix(got, " at 2019-01-01T13:45:24Z\n") {
		t.Fatalf("put printed %q", got)
	}

	for _, c := range []struct {
		where string
		want  []string
	}{
		{"instrumentType==commonstock", []string{"BBB", "AAA"}},
		{"exchange==EXCHG1", []string{"AAA", "Index1 ETF"}},
		{"price.currency==USD", []string{"AAA", "Index1 ETF"}},
		{`price.currency=="USD"`, []string{"AAA", "Index1 ETF"}},
	} {
		out := Run(t, dir, env, "query", "instruments", "--where", c.where, "--limit", "5").MustOK(t)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != len(c.want) {
			t.Fatalf("query --where %s printed %q, want %d documents", c.where, out, len(c.want))
		}
		for i, sym := range c.want {
			if !strings.Contains(lines[i], `"symbol":"`+sym+`"`) {
				t.Fatalf("query --where %s line %d = %q, want %s", c.where, i, lines[i], sym)
			}
		}
	}

	// Paging by hand with the printed token.
	out := Run(t, dir, env, "query", "instruments", "--limit", "3", "--order", "asc").MustOK(t)
	i := strings.Index(out, "next page: --page-token ")
	if i < 0 || strings.Count(out, "\n") != 4 {
		t.Fatalf("first page printed %q, want 3 documents and a next page token", out)
	}
	token := strings.TrimSpace(out[i+len("next page: --page-token "):])
	var page struct {
		Documents []struct {
			ID        string         `json:"id"`
			Shard     int            `json:"shard"`
			Timestamp string         `json:"timestamp"`
			Data      map[string]any `json:"data"`
		} `json:"documents"`
		NextPageToken string `json:"next_page_token"`
	}
	mustJSON(t, Run(t, dir, env, "query", "instruments", "--limit", "3", "--order", "asc", "--page-token", token, "--json").MustOK(t), &page)
	if len(page.Documents) != 1 || page.Documents[0].ID != "ccc" || page.NextPageToken != "" {
		t.Fatalf("second page = %+v, want only ccc and no token", page)
	}
	var refs shttp.PutDocumentsResponse
	mustJSON(t, Run(t, dir, env, "put", "instruments", `{}`, "--json").MustOK(t), &refs)
	if len(refs.Documents) != 1 || len(refs.Documents[0].ID) != 20 || refs.Documents[0].Timestamp.IsZero() {
		t.Fatalf("put --json of a document without id or timestamp gave %+v", refs)
	}

	for _, bad := range [][]string{
		{"collection", "create", "x"},
		{"collection", "drop", "x"},
		{"collection", "create", "x", "--shards", "2", "--shard-key", "round"},
		{"put", "instruments"},
		{"put", "instruments", "[1,2]"},
		{"put", "instruments", "-", "--id", "a"},
		{"query", "instruments", "--where", "exchange"},
		{"query", "instruments", "--limit", "0"},
		{"query", "instruments", "--order", "up"},
		{"query", "instruments", "--after", "noon"},
	} {
		RunStdin(t, dir, env, "", bad...).MustFail(t, 2)
	}
	for _, bad := range [][]string{
		{"query", "instruments", "--where", "symbol==AAA"},
		{"query", "instruments", "--page-token", "garbage"},
		{"query", "nothing"},
		{"collection", "create", "instruments", "--shards", "3"},
	} {
		msg := Run(t, dir, env, bad...).MustFail(t, 1)
		if bad[1] == "nothing" && !strings.Contains(msg, "shardcounter collection create (not_found)") {
			t.Fatalf("query of a missing collection: %q", msg)
		}
	}
}
