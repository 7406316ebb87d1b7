package main_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// TestRankCommands is the walk of a new user: 1,000 post counters
// written to, a ranking of them, `top` printing the ten largest in order,
// then list and delete; bad input is a usage error.
func TestRankCommands(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir)
	env := s.Env()
	c := shttp.NewClient(s.URL)
	var ws []shardcounter.Write
	for i := range 1000 {
		ws = append(ws, shardcounter.Write{Counter: fmt.Sprintf("post:%04d", i), Delta: int64(i*37%1000 + 1)})
	}
	if _, err := c.WriteBatch(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	got := Run(t, dir, env, "rank", "create", "liked", "--prefix", "post:", "--size", "100").MustOK(t)
	if got != "created ranking liked: top 100 of counters \"post:\"* by all-time value, at most 1s stale\n" {
		t.Fatalf("rank create printed %q", got)
	}
	got = Run(t, dir, env, "rank", "create", "liked", "--prefix", "post:", "--size", "100").MustOK(t)
	if !strings.HasPrefix(got, "ranking exists:") {
		t.Fatalf("rank create again printed %q", got)
	}
	got = Run(t, dir, env, "top", "liked", "-k", "3").MustOK(t)
	lines := strings.Split(got, "\n")
	// i*37 % 1000 = 999 at i = 27 (999), 998 at i = 54, 997 at i = 81.
	want := []string{"RANK  ID         VALUE", "1     post:0027  1000", "2     post:0054  999", "3     post:0081  998"}
	if len(lines) < 5 || strings.Join(lines[:4], "\n") != strings.Join(want, "\n") || !strings.Contains(lines[4], "1000 counters ranked") {
		t.Fatalf("top printed\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	if got := Run(t, dir, env, "top", "liked").MustOK(t); strings.Count(got, "post:") != 10 {
		t.Fatalf("top without -k printed %q, want ten entries", got)
	}
	got = Run(t, dir, env, "rank", "list").MustOK(t)
	if !strings.Contains(got, "liked") || !strings.Contains(got, "post:") {
		t.Fatalf("rank list printed %q", got)
	}
	Run(t, dir, env, "rank", "create", "bad", "--prefix", "x", "--size", "20000").MustFail(t, 2)
	Run(t, dir, env, "rank", "create", "bad", "--last", "90s").MustFail(t, 2)
	Run(t, dir, env, "top", "liked", "-k", "-2").MustFail(t, 2)
	Run(t, dir, env, "rank", "frobnicate").MustFail(t, 2)
	Run(t, dir, env, "top", "missing").MustFail(t, 1)
	if got := Run(t, dir, env, "rank", "delete", "liked").MustOK(t); got != "deleted ranking liked\n" {
		t.Fatalf("rank delete printed %q", got)
	}
	Run(t, dir, env, "top", "liked").MustFail(t, 1)
}
