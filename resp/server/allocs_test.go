package server

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/allocguard"
	"github.com/shardcounter/shardcounter/resp"
)

// adder is a CounterService whose writes are an atomic add and whose
// names all hold counters: what is left of a command's cost in
// TestWriteAllocs is the RESP server's.
type adder struct {
	shardcounter.CounterService // nil: only what the write path calls
	n                           atomic.Int64
}

func (a *adder) WriteBatch(_ context.Context, ws []shardcounter.Write) ([]shardcounter.WriteResult, error) {
	res := make([]shardcounter.WriteResult, len(ws))
	for i, w := range ws {
		v := a.n.Add(w.Delta)
		res[i] = shardcounter.WriteResult{Counter: w.Counter, Applied: true, Value: &v}
	}
	return res, nil
}

// ReadCounter finds nothing: every name is new, and the write creates it.
func (a *adder) ReadCounter(_ context.Context, id string, _ shardcounter.Consistency) (*shardcounter.Reading, error) {
	return nil, shardcounter.Errorf(shardcounter.ENOTFOUND, "counter %q not found", id)
}

// ReadCounters finds nothing either (a claim's probe reads a new hash's
// name and marker together).
func (a *adder) ReadCounters(_ context.Context, ids []string, _ shardcounter.Consistency) ([]shardcounter.ReadResult, error) {
	out := make([]shardcounter.ReadResult, len(ids))
	for i := range out {
		out[i].Err = shardcounter.ErrNotFound
	}
	return out, nil
}

// TestWriteAllocs guards the allocations of the RESP write path: INCR
// alone and a pipeline of 16, parsed, executed as one WriteBatch over a
// service whose write is an atomic add (one allocation, its results) and
// replied to, on a connection of the server; and a transaction of two
// INCRs, whose queued arguments take the transaction's chunks, not two
// allocations a command (19 before). The ceilings are today's
// counts: an allocation more fails the test, so that later work cannot
// quietly undo the gains (docs/BENCHMARKS.md, "Front doors"). Under the
// race detector it runs in a build without it (package allocguard).
func TestWriteAllocs(t *testing.T) {
	for _, c := range []struct {
		name     string
		pipeline int
		max      float64
	}{
		{"INCR", 1, 3},
		{"INCR x16", 16, 33},
		{"MULTI INCR INCR EXEC", 0, 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc := &adder{}
			s := New(svc, Options{})
			client, srv := net.Pipe()
			defer client.Close()
			defer srv.Close()
			conn := s.newConn(srv)
			cmds := make([]resp.Command, c.pipeline)
			for i := range cmds {
				cmds[i] = resp.Command{Args: [][]byte{[]byte("INCR"), []byte("hot")}}
			}
			writes := c.pipeline
			if c.pipeline == 0 { // the rate-limit transaction without its EXPIRE, two INCRs
				writes = 2
				cmds = []resp.Command{{Args: [][]byte{[]byte("MULTI")}}, {Args: [][]byte{[]byte("INCR"), []byte("hot")}},
					{Args: [][]byte{[]byte("INCR"), []byte("hot")}}, {Args: [][]byte{[]byte("EXEC")}}}
			}
			ran := allocguard.Check(t, 1000, c.max, func() {
				conn.run(cmds)
				conn.w.Reset()
			})
			if got, want := svc.n.Load(), int64(1001*writes); ran && got != want {
				t.Fatalf("hot is %d after %d INCRs", got, want)
			}
		})
	}
}

// TestNewHashAllocs guards the allocations of a new hash's first HINCRBY,
// which claims the name for a hash (a batch read of the name and its
// marker, which find nothing) and writes the marker joined to the field
// in one WriteBatch: the path of most writes of a hash per post over
// many posts (docs/BENCHMARKS.md, "Front doors"). The adder has no
// CreateCounter: a marker made in a commit of its own would panic. The
// ceiling is today's count, as TestWriteAllocs's: 16, 2 of them the
// adder's, most of the others the claim's (its read's ids and results,
// the claim's bookkeeping) and the ids of the field and the marker.
func TestNewHashAllocs(t *testing.T) {
	const runs = 1000
	svc := &adder{}
	s := New(svc, Options{})
	client, srv := net.Pipe()
	defer client.Close()
	defer srv.Close()
	conn := s.newConn(srv)
	cmds := make([][]resp.Command, runs+1) // AllocsPerRun runs once more to warm up
	for i := range cmds {
		cmds[i] = []resp.Command{{Args: [][]byte{[]byte("HINCRBY"), []byte("post:" + strconv.Itoa(i)), []byte("likes"), []byte("1")}}}
	}
	next := 0
	ran := allocguard.Check(t, runs, 16, func() {
		conn.run(cmds[next])
		next++
		conn.w.Reset()
	})
	// Each run wrote the field and the marker, 1 each.
	if got, want := svc.n.Load(), int64(2*(runs+1)); ran && got != want {
		t.Fatalf("the service added %d after %d HINCRBYs of new hashes, want %d (a field and a marker each)", got, runs+1, want)
	}
}

// taker is an adder that decides takes: every take allowed, whatever is
// left a constant. It is what CL.THROTTLE's write path needs of the
// engine, so that what is left of a take's cost is the RESP server's.
type taker struct{ adder }

func (tk *taker) WriteBatch(_ context.Context, ws []shardcounter.Write) ([]shardcounter.WriteResult, error) {
	res := make([]shardcounter.WriteResult, len(ws))
	lr := make([]shardcounter.LimitResult, len(ws))
	for i, w := range ws {
		tk.n.Add(w.Take.Cost)
		lr[i] = shardcounter.LimitResult{Allowed: true, Remaining: 7}
		res[i] = shardcounter.WriteResult{Counter: w.Counter, Applied: true, Limit: &lr[i]}
	}
	return res, nil
}

func (*taker) Throttle(context.Context, string, shardcounter.LimitPolicy, int64, bool) (*shardcounter.LimitResult, error) {
	panic("CL.THROTTLE is a write of the batch")
}

// TestThrottleAllocs guards the allocations of CL.THROTTLE on one key
// again and again (a client of a hot key): the connection makes the id of
// the key's state (two renderings of the policy, a hash of one) once, not
// once a take (13 allocations more). The ceiling is today's count.
func TestThrottleAllocs(t *testing.T) {
	svc := &taker{}
	s := New(svc, Options{})
	client, srv := net.Pipe()
	defer client.Close()
	defer srv.Close()
	conn := s.newConn(srv)
	cmds := []resp.Command{{Args: [][]byte{[]byte("CL.THROTTLE"), []byte("user:42"), []byte("15"), []byte("30"), []byte("60"), []byte("1")}}}
	ran := allocguard.Check(t, 1000, 4, func() {
		conn.run(cmds)
		if got := string(conn.w.Bytes()); got != "*5\r\n:0\r\n:16\r\n:7\r\n:-1\r\n:0\r\n" {
			t.Fatalf("CL.THROTTLE replied %q", got)
		}
		conn.w.Reset()
	})
	if got := svc.n.Load(); ran && got != 1001 {
		t.Fatalf("the service took %d after 1001 takes", got)
	}
}
