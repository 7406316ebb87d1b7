package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/internal/redistest"
	sredis "github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/resp/server"
)

// results returns each command's value, or its error's text.
func results(cmds []redis.Cmder) []any {
	out := make([]any, len(cmds))
	for i, c := range cmds {
		if err := c.Err(); err != nil && err != redis.Nil {
			out[i] = "error: " + err.Error()
			continue
		}
		switch c := c.(type) {
		case *redis.IntCmd:
			out[i] = c.Val()
		case *redis.StringCmd:
			if c.Err() == redis.Nil {
				out[i] = nil
			} else {
				out[i] = c.Val()
			}
		case *redis.SliceCmd:
			out[i] = c.Val()
		case *redis.Cmd:
			out[i] = c.Val()
		default:
			out[i] = fmt.Sprint(c.Args()...)
		}
	}
	return out
}

// TestTransactions checks MULTI/EXEC as go-redis's TxPipelined sends it:
// every command's reply, INCRs of one counter replying 1, 2 as on Redis,
// reads inside the transaction seeing the writes before them, and a
// command's own error among the others' replies while they apply.
func TestTransactions(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Get(ctx, "c")
			p.Incr(ctx, "c")
			p.Incr(ctx, "c")
			p.Get(ctx, "c")
			p.IncrBy(ctx, "c", 10)
			p.MGet(ctx, "c", "other", "never")
			p.Incr(ctx, "other")
			p.HIncrBy(ctx, "h", "f", 3)
			p.HGet(ctx, "h", "f")
			p.Ping(ctx)
			return nil
		})
		if err != nil && err != redis.Nil { // GET c of a missing c is nil
			t.Fatalf("TxPipelined: %v", err)
		}
		want := []any{nil, int64(1), int64(2), "2", int64(12), []any{"12", nil, nil}, int64(1), int64(3), "3", "ping"}
		if got := results(cmds); !reflect.DeepEqual(got, want) {
			t.Errorf("transaction replies = %#v\nwant %#v", got, want)
		}
		if got, _ := rdb.Get(ctx, "c").Result(); got != "12" {
			t.Errorf("GET c after EXEC = %q, want 12", got)
		}

		// A command's own error at EXEC: the others apply, as in Redis.
		cmds, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, "d")
			p.SAdd(ctx, "d", "m")
			p.Do(ctx, "INCRBY", "d", "x")
			p.HIncrBy(ctx, "c", "f", 1)
			p.Incr(ctx, "d")
			return nil
		})
		if err == nil {
			t.Fatal("a transaction with failing commands returned no error")
		}
		got := results(cmds)
		if got[0] != int64(1) || got[4] != int64(2) {
			t.Errorf("the writes around failing commands = %v, want 1 and 2", got)
		}
		for i, prefix := range map[int]string{1: "error: WRONGTYPE", 2: "error: ERR value is not an integer", 3: "error: WRONGTYPE"} {
			if s, _ := got[i].(string); len(s) < len(prefix) || s[:len(prefix)] != prefix {
				t.Errorf("reply %d = %v, want %s...", i, got[i], prefix)
			}
		}
		if n, _ := rdb.Get(ctx, "d").Int(); n != 2 {
			t.Errorf("d = %d after EXEC, want 2", n)
		}
	})
}

// TestTransactionRefusals checks what ends a transaction without applying
// it, and the replies Redis gives: EXECABORT after an unknown command, a
// wrong argument count or a command that cannot be queued; DISCARD; and
// the errors of EXEC and DISCARD without MULTI, nested MULTI and WATCH.
func TestTransactionRefusals(t *testing.T) {
	eng := MustEngine(t)
	_, addr := MustServe(t, eng, server.Options{})
	r := MustRaw(t, addr)
	r.send("MULTI\r\nINCR x\r\nNOPE a\r\nINCR\r\nDEL x\r\nINCR x\r\nEXEC\r\nGET x\r\n")
	r.expect("+OK\r\n", "+QUEUED\r\n",
		"-ERR unknown command 'NOPE', with args beginning with: 'a' \r\n",
		"-ERR wrong number of arguments for 'incr' command\r\n",
		"-ERR DEL cannot be part of a transaction: it deletes key by key, outside the batch a transaction commits; send it before MULTI or after EXEC\r\n",
		"+QUEUED\r\n",
		"-EXECABORT Transaction discarded because of previous errors.\r\n",
		"$-1\r\n")
	r.send("MULTI\r\nINCR y\r\nDISCARD\r\nGET y\r\nEXEC\r\nDISCARD\r\n")
	r.expect("+OK\r\n", "+QUEUED\r\n", "+OK\r\n", "$-1\r\n", "-ERR EXEC without MULTI\r\n", "-ERR DISCARD without MULTI\r\n")
	r.send("MULTI\r\nMULTI\r\nWATCH k\r\nINCR z\r\nEXEC\r\n")
	r.expect("+OK\r\n", "-ERR MULTI calls can not be nested\r\n", "-ERR WATCH inside MULTI is not allowed\r\n", "+QUEUED\r\n", "*1\r\n", ":1\r\n")
	r.send("WATCH k\r\nUNWATCH\r\nMULTI\r\nEXEC\r\nMULTI\r\nINCR w\r\nRESET\r\nGET w\r\n")
	if line := r.line(); len(line) < 20 || line[:20] != "-ERR WATCH is not su" {
		t.Errorf("WATCH: %q, want it refused", line)
	}
	r.expect("+OK\r\n", "+OK\r\n", "*0\r\n", "+OK\r\n", "+QUEUED\r\n", "+RESET\r\n", "$-1\r\n")
}

// TestTransactionAtomic checks that a transaction's writes commit
// together: clients move units from one counter to another (INCRBY a 1,
// DECRBY b 1 in MULTI/EXEC) while others read both in one MGET (one
// snapshot on bolt). With batches of 4 writes, cut by the engine between
// any two writes that are not joined, every snapshot must still see a
// and b sum to 0. (Without the joins it fails within a second.)
func TestTransactionAtomic(t *testing.T) {
	store, err := bolt.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	eng, err := engine.New(store, engine.Config{MaxBatch: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(context.Background()) })
	// A goroutine per connection, so that reads run while a commit of
	// another connection's batch is under way (the loop would read only
	// between its write batches).
	_, addr := MustServe(t, eng, server.Options{ConnGoroutines: true})
	ctx := context.Background()
	var wg sync.WaitGroup
	var stop atomic.Bool
	var moves, reads atomic.Int64
	for w := range 8 {
		rdb := MustClient(t, addr, 2, "")
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				if w%2 == 0 {
					_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
						p.IncrBy(ctx, "a", 1)
						p.Incr(ctx, fmt.Sprint("noise", w, i%5)) // fills batches
						p.DecrBy(ctx, "b", 1)
						return nil
					})
					if err != nil {
						t.Error(err)
						return
					}
					moves.Add(1)
					continue
				}
				vals, err := rdb.MGet(ctx, "a", "b").Result()
				if err != nil {
					t.Error(err)
					return
				}
				if vals[0] == nil || vals[1] == nil {
					continue
				}
				var a, b int64
				fmt.Sscan(vals[0].(string), &a)
				fmt.Sscan(vals[1].(string), &b)
				if a+b != 0 {
					t.Errorf("a snapshot saw a = %d, b = %d: half a transaction", a, b)
					stop.Store(true)
				}
				reads.Add(1)
			}
		})
	}
	time.Sleep(2 * time.Second)
	stop.Store(true)
	wg.Wait()
	if moves.Load() < 10 || reads.Load() < 10 {
		t.Fatalf("only %d transactions and %d reads ran", moves.Load(), reads.Load())
	}
}

// TestTransactionCluster checks EXEC on a Redis Cluster store: a
// transaction over several counters and hash fields is applied as one
// script on one master (every shard it wrote is on one master), and a
// transaction whose counters no master holds a shard of each of (counters
// of one shard on different masters) is refused with CROSSSLOT, applying
// nothing and running none of its other commands.
func TestTransactionCluster(t *testing.T) {
	ctx := context.Background()
	eng, store := clusterEngine(t, 16)
	_, addr := MustServe(t, eng, server.Options{})
	rdb := MustClient(t, addr, 3, "")
	cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "a")
		p.IncrBy(ctx, "b", 5)
		p.HIncrBy(ctx, "h", "f", 2)
		p.Decr(ctx, "c")
		p.Incr(ctx, "a")
		p.Get(ctx, "a")
		return nil
	})
	if got, want := results(cmds), []any{int64(1), int64(5), int64(2), int64(-1), int64(2), "2"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("a transaction over four counters = %v, %v; want %v", got, err, want)
	}
	nodes := make(map[string]bool) // of the shards written
	for _, id := range []string{"a", "b", "h\x1ff", "c"} {
		p, err := store.Placement(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, pl := range p.Places {
			if pl.Value != 0 {
				nodes[pl.Node] = true
			}
		}
	}
	if len(nodes) != 1 {
		t.Errorf("the transaction wrote shards on %v, want one master", nodes)
	}

	// A write with a request id keeps its shard, and sent again in a
	// transaction it is a duplicate: counted once.
	for round, want := range []any{int64(1), int64(0)} {
		cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "SC.INCRBY", "r", 3, "REQUEST-ID", "req-1")
			p.Incr(ctx, "b")
			return nil
		})
		if err != nil || cmds[0].(*redis.Cmd).Val() != want {
			t.Fatalf("round %d of a transaction with a request id: %v, %v; want %v first", round, results(cmds), err, want)
		}
	}
	if v, _ := rdb.Get(ctx, "r").Int(); v != 3 {
		t.Errorf("r = %d after a transaction sent twice with one request id, want 3", v)
	}

	testCrossSlotRefused(t, eng, store, rdb)

}

// TestTransactionOfReads checks a transaction of reads only: one batch
// read, the values as GET gives them, the other reads run in turn.
func TestTransactionOfReads(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		rdb.IncrBy(ctx, "x", 4)
		rdb.SAdd(ctx, "s", "a", "b")
		cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Get(ctx, "x")
			p.Exists(ctx, "x", "s", "no")
			p.SCard(ctx, "s")
			p.Type(ctx, "s")
			return nil
		})
		want := []any{"4", int64(2), int64(2), "types"}
		if got := results(cmds); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("reads in a transaction = %#v, %v; want %#v", got, err, want)
		}
		if typ := cmds[3].(*redis.StatusCmd).Val(); typ != "set" {
			t.Errorf("TYPE in a transaction = %q, want set", typ)
		}
	})
}

// testCrossSlotRefused sends transactions over counters of one shard on
// two masters: each is refused with CROSSSLOT, and nothing of it applies,
// its EXPIRE and its new hash included.
func testCrossSlotRefused(t *testing.T, eng *engine.Engine, store *sredis.CounterStore, rdb *redis.Client) {
	ctx := context.Background()
	// Counters of one shard, until two are on different masters.
	var x, y string
	first := ""
	for i := 0; y == ""; i++ {
		id := fmt.Sprint("solo/", i)
		if _, _, err := eng.CreateCounter(ctx, id, shardcounter.CreateOptions{Shards: 1}); err != nil {
			t.Fatal(err)
		}
		p, err := store.Placement(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch node := p.Places[0].Node; {
		case first == "":
			x, first = id, node
		case node != first:
			y = id
		}
	}
	for _, tx := range [][][]any{
		{{"INCR", x}, {"INCR", y}},
		{{"INCR", x}, {"EXPIRE", x, "100"}, {"HINCRBY", "fresh", "f", "1"}, {"INCRBY", y, "-4"}},
	} {
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range tx {
				p.Do(ctx, c...)
			}
			return nil
		})
		wantPrefix(t, fmt.Sprint(tx), err, "CROSSSLOT Keys in request don't hash to the same slot")
	}
	if vx, vy := rdb.Get(ctx, x).Val(), rdb.Get(ctx, y).Val(); vx != "0" || vy != "0" {
		t.Errorf("%s, %s = %q, %q after refused transactions, want 0, 0", x, y, vx, vy)
	}
	if ttl := rdb.TTL(ctx, x).Val(); ttl != -1 {
		t.Errorf("TTL %s = %v after a refused transaction's EXPIRE, want -1", x, ttl)
	}
	if n := rdb.Exists(ctx, "fresh").Val(); n != 0 {
		t.Errorf("a refused transaction created a hash")
	}
	// Pipelined without MULTI, the same writes apply one by one.
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, x)
		p.Incr(ctx, y)
		return nil
	}); err != nil {
		t.Errorf("the writes without MULTI: %v", err)
	}
}

// clusterEngine starts a Redis Cluster of three masters, its store and an
// engine on it whose counters have shards shards, with the store's scripts loaded
// on every master (TestHashes says why).
func clusterEngine(t *testing.T, shards int) (*engine.Engine, *sredis.CounterStore) {
	t.Helper()
	ctx := context.Background()
	a := redistest.MustStartCluster(t, 3).Addrs()
	store, err := sredis.Open(ctx, "redis+cluster://"+a[0]+"?addr="+strings.Join(a[1:], "&addr="), sredis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	eng, err := engine.New(store, engine.Config{DefaultShards: shards})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(ctx) })
	for i := range 16 {
		eng.WriteCounter(ctx, shardcounter.Write{Counter: fmt.Sprint("warm-up/", i), Delta: 1})
	}
	return eng, store
}
