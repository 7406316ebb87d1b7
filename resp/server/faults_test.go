package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/resp/server"
)

// faulty is a CounterService over a real engine that fails or changes
// what the test sets, for the replies to failures a healthy store does not
// give on demand.
type faulty struct {
	shardcounter.CounterService

	mu       sync.Mutex
	writeErr error // WriteBatch fails whole with it
	readErr  error // ReadCounter and ReadCounters fail with it
	noValue  bool  // WriteBatch gives no Value, as a service that cannot
	entered  chan struct{}
	gate     chan struct{} // WriteBatch waits for it, when set
	down     string        // ReadCounters fails whole when it reads this counter, as a store whose node holding it is down
	writes   int           // WriteBatch calls
	reads    int           // ReadCounters calls
}

func (f *faulty) set(fn func(f *faulty)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *faulty) WriteBatch(ctx context.Context, ws []shardcounter.Write) ([]shardcounter.WriteResult, error) {
	f.mu.Lock()
	werr, noValue, entered, gate := f.writeErr, f.noValue, f.entered, f.gate
	f.writes++
	f.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	if gate != nil {
		<-gate
	}
	if werr != nil {
		return nil, werr
	}
	res, err := f.CounterService.WriteBatch(ctx, ws)
	if noValue {
		for i := range res {
			res[i].Value = nil
		}
	}
	return res, err
}

func (f *faulty) ReadCounter(ctx context.Context, id string, c shardcounter.Consistency) (*shardcounter.Reading, error) {
	f.mu.Lock()
	rerr := f.readErr
	f.mu.Unlock()
	if rerr != nil {
		return nil, rerr
	}
	return f.CounterService.ReadCounter(ctx, id, c)
}

func (f *faulty) ReadCounters(ctx context.Context, ids []string, c shardcounter.Consistency) ([]shardcounter.ReadResult, error) {
	f.mu.Lock()
	rerr := f.readErr
	f.reads++
	if f.down != "" && slices.Contains(ids, f.down) {
		rerr = shardcounter.Errorf(shardcounter.EUNAVAILABLE, "the node of %s is down", f.down)
	}
	f.mu.Unlock()
	if rerr != nil {
		return nil, rerr
	}
	return f.CounterService.ReadCounters(ctx, ids, c)
}

func TestFailureReplies(t *testing.T) {
	f := &faulty{CounterService: MustEngine(t)}
	_, addr := MustServe(t, f, serverOptions())
	rdb := MustClient(t, addr, 3, "")
	ctx := context.Background()

	unavailable := shardcounter.Errorf(shardcounter.EUNAVAILABLE, "the store cannot be reached: nothing applied, retry")
	unknown := &shardcounter.Error{Code: shardcounter.EOUTCOMEUNKNOWN, Message: "the commit timed out: the write may still apply", OutcomeUnknown: true}

	f.set(func(f *faulty) { f.writeErr = unavailable })
	wantErr(t, "INCR, store unreachable", rdb.Incr(ctx, "k").Err(), "TRYAGAIN the store cannot be reached: nothing applied, retry")
	wantErr(t, "SADD, store unreachable", rdb.SAdd(ctx, "s", "m").Err(), "TRYAGAIN the store cannot be reached: nothing applied, retry")
	f.set(func(f *faulty) { f.writeErr = unknown })
	wantErr(t, "INCR, outcome unknown", rdb.Incr(ctx, "k").Err(), "UNKNOWN the commit timed out: the write may still apply")
	wantErr(t, "SC.INCRBY, outcome unknown", rdb.Do(ctx, "SC.INCRBY", "k", 1, "REQUEST-ID", "r").Err(), "UNKNOWN the commit timed out: the write may still apply")
	f.set(func(f *faulty) { f.writeErr = errors.New("a bug's own words") })
	wantErr(t, "INCR, unclassified error", rdb.Incr(ctx, "k").Err(), "ERR internal error: internal error")
	f.set(func(f *faulty) { f.writeErr = nil; f.readErr = unavailable })
	wantErr(t, "GET, store unreachable", rdb.Get(ctx, "k").Err(), "TRYAGAIN the store cannot be reached: nothing applied, retry")
	wantErr(t, "MGET, store unreachable", rdb.MGet(ctx, "k", "j").Err(), "TRYAGAIN the store cannot be reached: nothing applied, retry")
	f.set(func(f *faulty) { f.readErr = nil })
	if _, err := rdb.Get(ctx, "k").Result(); err != redis.Nil {
		t.Errorf("after the failed writes: GET = %v, want nil: nothing was applied", err)
	}
}

// TestIncrWithoutValue checks INCR over a service that gives no value
// after the write: the server reads it, once per counter per batch.
func TestIncrWithoutValue(t *testing.T) {
	f := &faulty{CounterService: MustEngine(t), noValue: true}
	_, addr := MustServe(t, f, serverOptions())
	rdb := MustClient(t, addr, 2, "")
	ctx := context.Background()
	for want := int64(1); want <= 3; want++ {
		if got, err := rdb.Incr(ctx, "k").Result(); err != nil || got != want {
			t.Errorf("INCR: %d, %v; want %d", got, err, want)
		}
	}
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range 10 {
			p.Incr(ctx, "k")
		}
		p.Decr(ctx, "other")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds[:10] {
		if v := c.(*redis.IntCmd).Val(); v != 13 {
			t.Errorf("pipelined INCR: %d, want 13, the value read after the batch", v)
		}
	}
	if v := cmds[10].(*redis.IntCmd).Val(); v != -1 {
		t.Errorf("pipelined DECR of another counter: %d, want -1", v)
	}
	// The write applied but its value cannot be read: the reply says so.
	f.set(func(f *faulty) { f.readErr = shardcounter.Errorf(shardcounter.EUNAVAILABLE, "down") })
	wantErr(t, "INCR, value unreadable", rdb.Incr(ctx, "k").Err(), "UNKNOWN the write was applied, but reading the value after it failed (down): read it with GET")
	f.set(func(f *faulty) { f.readErr = nil })
	if v, err := rdb.Get(ctx, "k").Result(); err != nil || v != "14" {
		t.Errorf("GET: %q, %v; want 14", v, err)
	}
}

// TestShutdown checks that Shutdown lets a command executing finish and
// send its reply, closes idle connections, and stops accepting. A
// connection served on its own goroutine is closed at once when idle; the
// event loop closes its idle connections once the cycle executing the
// command is over.
func TestShutdown(t *testing.T) {
	for _, goroutines := range []bool{false, true} {
		t.Run(fmt.Sprintf("ConnGoroutines=%v", goroutines), func(t *testing.T) {
			f := &faulty{CounterService: MustEngine(t), entered: make(chan struct{}, 1), gate: make(chan struct{})}
			ln := listen(t)
			opts := serverOptions()
			opts.ConnGoroutines = goroutines
			s := server.New(f, opts)
			served := make(chan error, 1)
			go func() { served <- s.Serve(ln) }()
			addr := ln.Addr().String()

			idle := MustRaw(t, addr)
			idle.send("PING\r\n")
			idle.expect("+PONG\r\n")
			busy := MustRaw(t, addr)
			busy.send("INCR k\r\n")
			<-f.entered
			shut := make(chan error, 1)
			go func() { shut <- s.Shutdown(context.Background()) }()
			if goroutines {
				idle.expectClosed()
			}
			select {
			case err := <-shut:
				t.Fatalf("Shutdown returned %v while a command was executing", err)
			case <-time.After(50 * time.Millisecond):
			}
			f.set(func(f *faulty) { f.entered = nil })
			close(f.gate)
			busy.expect(":1\r\n")
			busy.expectClosed()
			idle.expectClosed()
			if err := <-shut; err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			if err := <-served; !errors.Is(err, server.ErrServerClosed) {
				t.Errorf("Serve: %v, want ErrServerClosed", err)
			}
			if c, err := dial(addr); err == nil {
				c.Close()
				t.Errorf("a connection was accepted after Shutdown")
			}
		})
	}
}

func TestMaxClients(t *testing.T) {
	_, addr := MustServe(t, MustEngine(t), server.Options{MaxClients: 1})
	first := MustRaw(t, addr)
	first.send("PING\r\n")
	first.expect("+PONG\r\n")
	second := MustRaw(t, addr)
	second.expect("-ERR max number of clients reached\r\n")
	second.expectClosed()
	first.send("PING\r\n")
	first.expect("+PONG\r\n")
}

// TestBatchReadFailsAlone checks that when a batch read of several
// commands fails whole (a cluster node down for one counter), each command
// is read again on its own: only the commands that read the failing
// counter fail.
func TestBatchReadFailsAlone(t *testing.T) {
	f := &faulty{CounterService: MustEngine(t), down: "lost"}
	_, addr := MustServe(t, f, serverOptions())
	r := MustRaw(t, addr)
	r.send("INCR a\r\n")
	r.expect(":1\r\n")
	r.send("MGET a b\r\nMGET lost a\r\nGET a\r\nEXISTS a lost\r\nEXISTS a\r\n")
	r.expect("*2\r\n$1\r\n1\r\n$-1\r\n")
	if got := r.line(); !strings.HasPrefix(got, "-TRYAGAIN the node of lost is down") {
		t.Errorf("MGET lost a: %q, want its own TRYAGAIN", got)
	}
	r.expect("$1\r\n1\r\n")
	if got := r.line(); !strings.HasPrefix(got, "-TRYAGAIN the node of lost is down") {
		t.Errorf("EXISTS a lost: %q, want its own TRYAGAIN", got)
	}
	r.expect(":1\r\n")
}
