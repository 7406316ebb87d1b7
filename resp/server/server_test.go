package server_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/resp/server"
)

// MustEngine returns a durable engine over a bolt store in a temporary
// directory, closed when the test ends.
func MustEngine(tb testing.TB) *engine.Engine {
	tb.Helper()
	store, err := bolt.Open(context.Background(), filepath.Join(tb.TempDir(), "counters.db"), bolt.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	eng, err := engine.New(store, engine.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := eng.Close(ctx); err != nil {
			tb.Error(err)
		}
		store.Close()
	})
	return eng
}

// MustServe serves svc over RESP on a free loopback port and returns the
// server and its address; the server shuts down when the test ends.
// connGoroutines makes MustServe's servers serve each connection on its
// own goroutine instead of the event loop: scripts/test.sh runs this
// package's tests a second time with SHARDCOUNTER_RESP_GOROUTINES=1, so
// that both ways of serving pass them all.
var connGoroutines = os.Getenv("SHARDCOUNTER_RESP_GOROUTINES") == "1"

func MustServe(tb testing.TB, svc shardcounter.CounterService, opts server.Options) (*server.Server, string) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	opts.ConnGoroutines = opts.ConnGoroutines || connGoroutines
	s := server.New(svc, opts)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			tb.Error(err)
		}
		if err := <-done; !errors.Is(err, server.ErrServerClosed) {
			tb.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return s, ln.Addr().String()
}

// MustClient returns a go-redis client of addr speaking RESP proto (2 or
// 3), closed when the test ends.
func MustClient(tb testing.TB, addr string, proto int, password string) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: proto, Password: password, MaxRetries: -1})
	tb.Cleanup(func() { c.Close() })
	return c
}

// eachProto runs f as a subtest for RESP2 and RESP3, each with its own
// engine, server and go-redis client.
func eachProto(t *testing.T, f func(t *testing.T, rdb *redis.Client, proto int)) {
	for _, proto := range []int{2, 3} {
		t.Run("RESP"+string(rune('0'+proto)), func(t *testing.T) {
			eng := MustEngine(t)
			_, addr := MustServe(t, eng, server.Options{Engine: eng.Stats()})
			f(t, MustClient(t, addr, proto, ""), proto)
		})
	}
}

// wantErr checks that err is a Redis error with exactly the text want.
func wantErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || err.Error() != want {
		t.Errorf("%s: err = %v, want %q", what, err, want)
	}
}

// wantPrefix checks that err is a Redis error whose text starts with want.
func wantPrefix(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Errorf("%s: err = %v, want one starting %q", what, err, want)
	}
}
