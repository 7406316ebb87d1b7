package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shardcounter/shardcounter"
)

// The cases in this file check DESIGN invariant 7: a strong read is
// linearizable, on every store, while writes and reshards go on. Times
// are the monotonic clock's, taken before a call and after its reply, so
// each operation's interval contains the moment it took effect.

// monotonic returns nanoseconds since start on the monotonic clock.
type monotonic struct{ start time.Time }

func (c monotonic) now() int64 { return time.Since(c.start).Nanoseconds() }

// pause paces a reader: a few reads per write on a store whose writes
// wait for fsync, so that the reads cover the writes without flooding the
// check (or, on bolt, the file's lock) with millions of them.
func pause() { time.Sleep(300 * time.Microsecond) }

// readOnce reads one counter by ReadCounter or, half the time, by a
// ReadCounters of it alone, so both paths are checked.
func readOnce(ctx context.Context, s shardcounter.CounterStore, id string, rng *rand.Rand) (int64, error) {
	if rng.IntN(2) == 0 {
		r, err := s.ReadCounter(ctx, id)
		if err != nil {
			return 0, err
		}
		return r.Value, nil
	}
	rs, err := s.ReadCounters(ctx, []string{id})
	if err != nil {
		return 0, err
	}
	if rs[0] == nil {
		return 0, fmt.Errorf("ReadCounters: no reading of %s", id)
	}
	return rs[0].Value, nil
}

// writeOnce adds delta to one counter by Add or by a one-item Apply.
func writeOnce(ctx context.Context, s shardcounter.CounterStore, id string, delta int64, rng *rand.Rand) error {
	_, err := writeTotal(ctx, s, id, delta, false, rng)
	return err
}

// writeTotal adds delta to one counter by Add or by a one-item Apply, which
// asks for the counter's total when total is set; it returns the total
// the store gave, if any.
func writeTotal(ctx context.Context, s shardcounter.CounterStore, id string, delta int64, total bool, rng *rand.Rand) (*int64, error) {
	if !total && rng.IntN(2) == 0 {
		return nil, s.Add(ctx, id, delta, rng.Uint64())
	}
	out, err := s.Apply(ctx, []shardcounter.Increment{{Counter: id, Delta: delta, Pick: rng.Uint64(), Total: total}})
	if err != nil {
		return nil, err
	}
	return out[0].Total, out[0].Err
}

// reshardUntil reshards the counters to random shard counts, up and down,
// until done is closed. The pause makes a reshard every few writes rather
// than between each pair.
func reshardUntil(t *testing.T, s shardcounter.CounterStore, ids []string, done <-chan struct{}) {
	rng := rand.New(rand.NewPCG(11, uint64(time.Now().UnixNano())))
	for {
		select {
		case <-done:
			return
		case <-time.After(3 * time.Millisecond):
		}
		n := 1 + rng.IntN(16)
		if _, err := s.ReshardCounter(context.Background(), ids[rng.IntN(len(ids))], n); err != nil {
			t.Errorf("ReshardCounter(%d): %v", n, err)
			return
		}
	}
}

// readUntil starts readers goroutines in wg that read id (readOnce) until
// done is closed, pausing between reads, and pass check each value with
// the call's interval on clk. check runs on the readers' goroutines.
func readUntil(t *testing.T, wg *sync.WaitGroup, s shardcounter.CounterStore, id string, readers int, done <-chan struct{}, clk monotonic, check func(call, ret, v int64)) {
	for r := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(100+r), uint64(time.Now().UnixNano())))
			for {
				select {
				case <-done:
					return
				default:
				}
				call := clk.now()
				v, err := readOnce(context.Background(), s, id, rng)
				if err != nil {
					t.Errorf("read %s: %v", id, err)
					return
				}
				check(call, clk.now(), v)
				pause()
			}
		})
	}
}

// testTransfer is the transfer property of issue 17: each client i owns
// the amount 2^i and writes +2^i, waits for the acknowledgement, then
// −2^i, over and over, so the counter only ever holds a sum of distinct
// powers of two, one per client holding its amount. Readers check every
// strong read: it is never negative nor above the sum of every amount,
// and a client with no write in flight during the read either holds its
// amount (bit i set) or does not, as its last acknowledged write says. A
// read assembled from shards read at different moments (the −2^i of one
// shard without the +2^i of another) fails it.
func testTransfer(t *testing.T, s shardcounter.CounterStore) {
	ctx := context.Background()
	id := prefix(t) + "c"
	MustCreate(t, s, id, 8)
	const clients = 8
	rounds := scale(8, 25)
	clk := monotonic{time.Now()}

	type op struct{ call, ret int64 }
	ops := make([][]op, clients) // each client's writes, in order: +, −, +, −, ...
	type read struct {
		call, ret, value int64
	}
	var (
		mu    sync.Mutex
		reads []read
	)
	done := make(chan struct{})
	var writers, others sync.WaitGroup
	for i := range clients {
		writers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for r := range 2 * rounds {
				delta := int64(1) << i
				if r%2 == 1 {
					delta = -delta
				}
				call := clk.now()
				if err := writeOnce(ctx, s, id, delta, rng); err != nil {
					t.Errorf("client %d write %+d: %v", i, delta, err)
					return
				}
				ops[i] = append(ops[i], op{call, clk.now()})
			}
		})
	}
	readUntil(t, &others, s, id, 3, done, clk, func(call, ret, v int64) {
		mu.Lock()
		reads = append(reads, read{call, ret, v})
		mu.Unlock()
	})
	others.Go(func() { reshardUntil(t, s, []string{id}, done) })
	writers.Wait()
	close(done)
	others.Wait()
	if t.Failed() {
		return
	}

	bad := 0
	for _, rd := range reads {
		if rd.value < 0 || rd.value >= 1<<clients {
			t.Errorf("a strong read returned %d: the counter only ever holds a sum of distinct amounts 2^0..2^%d", rd.value, clients-1)
			bad++
		}
		for i := range clients {
			done := 0 // writes of client i acknowledged before the read began
			inFlight := false
			for _, o := range ops[i] {
				switch {
				case o.ret < rd.call:
					done++
				case o.call <= rd.ret:
					inFlight = true
				}
			}
			if inFlight {
				continue
			}
			if held := done%2 == 1; held != (rd.value>>i&1 == 1) {
				t.Errorf("a strong read returned %d (%b): client %d had no write in flight and held %v", rd.value, rd.value, i, held)
				bad++
			}
		}
		if bad > 5 {
			t.Fatal("too many bad reads; stopping")
		}
	}
	if got := MustRead(t, s, id); got != 0 {
		t.Errorf("value after every client took its amount back = %d, want 0", got)
	}
	t.Logf("%d strong reads checked against %d writes", len(reads), clients*2*rounds)
}

// counterOp is an operation of a linearizability history on one counter:
// a write of Delta, or a read that returned its output. A write that
// asked for the counter's total is two operations of its client, both
// with the write's interval: the write (Then set) and the total, a read
// (After set) that must come after that write, since a store takes a
// total at the commit or reads it after.
type counterOp struct {
	Counter string
	Client  int
	Read    bool
	Delta   int64
	Then    bool // a write whose client reads the total after it
	After   bool // that read
}

// counterState is a counter's value and, by client, whether the client's
// write that asked for a total has taken effect and its total is still to
// be read (clients are fewer than 32).
type counterState struct {
	v      int64
	unread uint32
}

// counterModel is the sequential specification of counters, partitioned
// by counter: linearizability is local, so each counter's history is
// checked on its own.
var counterModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := make(map[string][]porcupine.Operation)
		var order []string
		for _, op := range history {
			c := op.Input.(counterOp).Counter
			if _, ok := by[c]; !ok {
				order = append(order, c)
			}
			by[c] = append(by[c], op)
		}
		var out [][]porcupine.Operation
		for _, c := range order {
			out = append(out, by[c])
		}
		return out
	},
	Init: func() any { return counterState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in := state.(counterState), input.(counterOp)
		bit := uint32(1) << in.Client
		switch {
		case in.After:
			if st.unread&bit == 0 {
				return false, st
			}
			st.unread &^= bit
			return output.(int64) == st.v, st
		case in.Read:
			return output.(int64) == st.v, st
		case in.Then:
			st.unread |= bit
		}
		st.v += in.Delta
		return true, st
	},
	DescribeOperation: func(input, output any) string {
		in := input.(counterOp)
		switch {
		case in.After:
			return fmt.Sprintf("total %s → %d", in.Counter, output)
		case in.Read:
			return fmt.Sprintf("read %s → %d", in.Counter, output)
		}
		return fmt.Sprintf("add %s %+d", in.Counter, in.Delta)
	},
}

// checkTimeout bounds the linearizability check. The histories are sized
// to be decided in well under a second; Unknown is a failure, since an
// unchecked history proves nothing.
const checkTimeout = time.Minute

// testLinearizable records a history of writes (Add, one-item and
// two-counter Apply, half of them asking for the counter's total) and
// strong reads (ReadCounter, ReadCounters of one counter and of both) on
// two counters from several clients, while a resharder changes their
// shard counts, and checks it with porcupine: a read, and a write's total,
// must be a value the counter held at some moment between the call and
// the reply (the total: right after the write), in an order consistent
// with every write's. A batch
// read or write of both counters is checked as one operation per counter
// with the batch's interval, which holds whether or not the store makes
// the batch one snapshot.
func testLinearizable(t *testing.T, s shardcounter.CounterStore) {
	ids := []string{prefix(t) + "a", prefix(t) + "b"}
	MustCreate(t, s, ids[0], 4)
	MustCreate(t, s, ids[1], 1)
	const clients = 6
	n := scale(25, 60)
	h := &linHistory{clk: monotonic{time.Now()}}

	done := make(chan struct{})
	var clientsWG, resharder sync.WaitGroup
	resharder.Go(func() { reshardUntil(t, s, ids, done) })
	for c := range clients {
		clientsWG.Go(func() { h.runClient(t, s, ids, c, n) })
	}
	clientsWG.Wait()
	close(done)
	resharder.Wait()
	if t.Failed() {
		return
	}
	checkLinearizable(t, h.ops)
}

// linHistory is the history testLinearizable's clients record together.
// It is safe for concurrent use.
type linHistory struct {
	clk    monotonic
	mu     sync.Mutex
	ops    []porcupine.Operation
	failed atomic.Bool // a client has failed: the others stop
}

// record adds one operation by client, called at call and returned at ret.
func (h *linHistory) record(client int, call, ret int64, in counterOp, out any) {
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}

// recordWrite records a write, and the total it returned, if any.
func (h *linHistory) recordWrite(client int, call, ret int64, counter string, delta int64, total *int64) {
	if total == nil {
		h.record(client, call, ret, counterOp{Counter: counter, Client: client, Delta: delta}, nil)
		return
	}
	h.record(client, call, ret, counterOp{Counter: counter, Client: client, Delta: delta, Then: true}, nil)
	h.record(client, call, ret, counterOp{Counter: counter, Client: client, Read: true, After: true}, *total)
}

// runClient is client c: n random operations on ids, each recorded. It
// stops at its first error, which fails the test, or once another client
// has failed, since a history with a gap proves nothing.
func (h *linHistory) runClient(t *testing.T, s shardcounter.CounterStore, ids []string, c, n int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
	for range n {
		if h.failed.Load() {
			return
		}
		if err := h.step(ctx, s, ids, c, rng); err != nil {
			h.failed.Store(true)
			t.Error(err)
			return
		}
	}
}

// step runs and records one random operation of client c: a third of
// them write one counter, a sixth write both in one batch, a sixth read
// both in one batch, and a third read one counter.
func (h *linHistory) step(ctx context.Context, s shardcounter.CounterStore, ids []string, c int, rng *rand.Rand) error {
	id := ids[rng.IntN(2)]
	delta := 1 + rng.Int64N(999)
	if rng.IntN(3) == 0 {
		delta = -delta
	}
	call := h.clk.now()
	switch rng.IntN(6) {
	case 0, 1: // one write, which asks for its total half the time
		total, err := writeTotal(ctx, s, id, delta, rng.IntN(2) == 0, rng)
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		h.recordWrite(c, call, h.clk.now(), id, delta, total)
	case 2:
		return h.applyBoth(ctx, s, ids, c, call, delta, rng)
	case 3:
		return h.readBoth(ctx, s, ids, c, call)
	default: // one read
		v, err := readOnce(ctx, s, id, rng)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		h.record(c, call, h.clk.now(), counterOp{Counter: id, Read: true}, v)
	}
	return nil
}

// applyBoth writes both counters in one batch, delta to the first and
// about half of it the other way to the second, asking for their totals
// half the time, and records it as one write per counter.
func (h *linHistory) applyBoth(ctx context.Context, s shardcounter.CounterStore, ids []string, c int, call, delta int64, rng *rand.Rand) error {
	other := -delta / 2
	if other == 0 {
		other = 1
	}
	total := rng.IntN(2) == 0
	out, err := s.Apply(ctx, []shardcounter.Increment{
		{Counter: ids[0], Delta: delta, Pick: rng.Uint64(), Total: total},
		{Counter: ids[1], Delta: other, Pick: rng.Uint64(), Total: total},
	})
	if err == nil && (out[0].Err != nil || out[1].Err != nil) {
		err = fmt.Errorf("%v; %v", out[0].Err, out[1].Err)
	}
	if err != nil {
		return fmt.Errorf("Apply of both counters: %w", err)
	}
	ret := h.clk.now()
	h.recordWrite(c, call, ret, ids[0], delta, out[0].Total)
	h.recordWrite(c, call, ret, ids[1], other, out[1].Total)
	return nil
}

// readBoth reads both counters in one ReadCounters and records it as one
// read per counter.
func (h *linHistory) readBoth(ctx context.Context, s shardcounter.CounterStore, ids []string, c int, call int64) error {
	rs, err := s.ReadCounters(ctx, ids)
	if err == nil && (rs[0] == nil || rs[1] == nil) {
		err = fmt.Errorf("missing reading: %v", rs)
	}
	if err != nil {
		return fmt.Errorf("ReadCounters: %w", err)
	}
	ret := h.clk.now()
	h.record(c, call, ret, counterOp{Counter: ids[0], Read: true}, rs[0].Value)
	h.record(c, call, ret, counterOp{Counter: ids[1], Read: true}, rs[1].Value)
	return nil
}

// checkLinearizable checks history with porcupine and fails the test,
// with a drawing of the history, unless it is linearizable.
func checkLinearizable(t *testing.T, history []porcupine.Operation) {
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(counterModel, history, checkTimeout)
	switch res {
	case porcupine.Ok:
		t.Logf("%d operations linearizable (checked in %v)", len(history), time.Since(start).Round(time.Millisecond))
	case porcupine.Illegal:
		msg := fmt.Sprintf("the history of %d operations is not linearizable: a strong read, or a write's total, returned a value the counter never held during the call", len(history))
		if f, err := writeVisualization(info); err == nil {
			msg += "; the history and its longest linearizable prefix are drawn in " + f
		}
		t.Fatal(msg)
	default:
		t.Fatalf("the linearizability check of %d operations did not finish within %v: the history is too large for this machine", len(history), checkTimeout)
	}
}

// writeVisualization draws a history that failed the check into an HTML
// file that outlives the test, and returns its path.
func writeVisualization(info porcupine.LinearizationInfo) (string, error) {
	f, err := os.CreateTemp("", "shardcounter-linearizability-*.html")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := porcupine.Visualize(counterModel, info, f); err != nil {
		return "", err
	}
	return f.Name(), nil
}
