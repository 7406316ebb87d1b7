package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/internal/redistest"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/postgres"
	sredis "github.com/shardcounter/shardcounter/redis"
	"github.com/shardcounter/shardcounter/resp/server"
)

// throttle runs CL.THROTTLE and returns its five integers.
func throttle(t *testing.T, rdb *redis.Client, args ...any) [5]int64 {
	t.Helper()
	v, err := rdb.Do(context.Background(), append([]any{"CL.THROTTLE"}, args...)...).Int64Slice()
	if err != nil || len(v) != 5 {
		t.Fatalf("CL.THROTTLE %v: %v, %v; want five integers", args, v, err)
	}
	return [5]int64(v)
}

// near checks a reply's times, which count down from a take on the
// store's clock: reset after within a minute below resetMax (the test
// takes far less), retry after likewise (or exactly -1).
func near(t *testing.T, what string, got [5]int64, limited, limit, remaining, retryMax, resetMax int64) {
	t.Helper()
	okRetry := got[3] == retryMax || (retryMax > 0 && got[3] <= retryMax && got[3] >= retryMax-60)
	okReset := got[4] <= resetMax && got[4] >= resetMax-60
	if got[0] != limited || got[1] != limit || got[2] != remaining || !okRetry || !okReset {
		t.Errorf("%s: %v, want [%d %d %d %d %d] (times rounded down)", what, got, limited, limit, remaining, retryMax, resetMax)
	}
}

// TestThrottle drives CL.THROTTLE as redis-cell's users do, with a
// go-redis client on a bolt store: a burst of max_burst + 1 admitted and
// then limited with the wait until one more token, a probe (quantity 0)
// that takes nothing and is never limited, a quantity above the burst
// limited for ever (retry after -1), other arguments for the same key
// keeping a state of their own, and bad arguments refused with nothing
// taken, and takes in a transaction decided in its commit. A token an hour
// keeps the refill out of the figures.
func TestThrottle(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		const hour = 3600
		for i := int64(1); i <= 5; i++ {
			near(t, fmt.Sprintf("take %d", i), throttle(t, rdb, "user", 4, 1, hour), 0, 5, 5-i, -1, i*hour)
		}
		near(t, "take 6", throttle(t, rdb, "user", 4, 1, hour), 1, 5, 0, hour, 5*hour)
		near(t, "probe", throttle(t, rdb, "user", 4, 1, hour, 0), 0, 5, 0, -1, 5*hour)
		near(t, "above the burst", throttle(t, rdb, "user", 4, 1, hour, 6), 1, 5, 0, -1, 5*hour)

		// Other arguments, the same key: a state of their own, and the
		// first one's is untouched.
		near(t, "another policy", throttle(t, rdb, "user", 9, 1, hour, 3), 0, 10, 7, -1, 3*hour)
		near(t, "another key", throttle(t, rdb, "other", 4, 1, hour, 5), 0, 5, 0, -1, 5*hour)
		near(t, "the first policy again", throttle(t, rdb, "user", 4, 1, hour, 0), 0, 5, 0, -1, 5*hour)

		// A fresh key probed: its whole burst, nothing to wait for.
		near(t, "fresh probe", throttle(t, rdb, "fresh", 0, 10, 1, 0), 0, 1, 1, -1, 0)

		for _, tc := range []struct {
			args []any
			want string
		}{
			{[]any{"k", 1, 1}, "ERR wrong number of arguments for 'cl.throttle' command"},
			{[]any{"k", 1, 1, 60, 1, 1}, "ERR wrong number of arguments for 'cl.throttle' command"},
			{[]any{"k", "x", 1, 60}, "ERR value is not an integer or out of range"},
			{[]any{"k", 1, 1, "1.5"}, "ERR value is not an integer or out of range"},
			{[]any{"k", -1, 1, 60}, "ERR max_burst must be 0 or more"},
			{[]any{"k", 1, 0, 60}, "ERR count per period must be 1 or more"},
			{[]any{"k", 1, 1, 0}, "ERR period must be 1 second or more"},
			{[]any{"k", 1, 1, 60, -1}, "ERR quantity must be 0 or more"},
			{[]any{"k", 1, 1, 40000000}, "ERR period must be at most 31622400 seconds (366 days)"},
			{[]any{"k", 1 << 40, 1, 60}, "ERR max_burst and count must be below 1099511627776"},
			{[]any{"k", 1, 2000000000, 1}, "ERR limit 2000000000 a 1s is more than one a nanosecond: give a longer period"},
			{[]any{"", 1, 1, 60}, "ERR counter id is empty: give 1 to 256 bytes of UTF-8"},
		} {
			wantErr(t, fmt.Sprint(tc.args), rdb.Do(ctx, append([]any{"CL.THROTTLE"}, tc.args...)...).Err(), tc.want)
		}
		near(t, "after the refusals", throttle(t, rdb, "k", 1, 1, 60, 0), 0, 2, 2, -1, 0)

		// Pipelined, the takes share commits and are decided in order.
		pipe := rdb.Pipeline()
		var cmds []*redis.Cmd
		for range 7 {
			cmds = append(cmds, pipe.Do(ctx, "CL.THROTTLE", "piped", 4, 1, hour))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for i, cmd := range cmds {
			v, err := cmd.Int64Slice()
			if err != nil || len(v) != 5 {
				t.Fatalf("pipelined take %d: %v, %v", i, v, err)
			}
			if limited := int64(i) >= 5; (v[0] == 1) != limited || v[2] != max(4-int64(i), 0) {
				t.Errorf("pipelined take %d: %v, want limited %v, remaining %d", i, v, limited, max(4-i, 0))
			}
		}

		// In a transaction: the takes are writes of EXEC's batch, decided
		// in its commit in order with the other writes, each replying its
		// five integers.
		txc, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, "tx-count")
			p.Do(ctx, "CL.THROTTLE", "tx", 1, 1, hour)
			p.Do(ctx, "CL.THROTTLE", "tx", 1, 1, hour)
			p.Do(ctx, "CL.THROTTLE", "tx", 1, 1, hour)
			p.Do(ctx, "CL.THROTTLE", "tx", 1, 1, hour, 0)
			p.Incr(ctx, "tx-count")
			return nil
		})
		if err != nil || len(txc) != 6 {
			t.Fatalf("a transaction of takes: %v, %v", results(txc), err)
		}
		if n := txc[5].(*redis.IntCmd).Val(); n != 2 {
			t.Errorf("INCR after the takes in the transaction = %d, want 2", n)
		}
		for i, want := range []struct{ limited, remaining, retry, reset int64 }{{0, 1, -1, hour}, {0, 0, -1, 2 * hour}, {1, 0, hour, 2 * hour}, {0, 0, -1, 2 * hour}} {
			v, err := txc[1+i].(*redis.Cmd).Int64Slice()
			if err != nil || len(v) != 5 {
				t.Fatalf("take %d of the transaction: %v, %v; want five integers", i, v, err)
			}
			near(t, fmt.Sprint("take ", i, " of the transaction"), [5]int64(v), want.limited, 2, want.remaining, want.retry, want.reset)
		}
		near(t, "after the transaction of takes", throttle(t, rdb, "tx", 1, 1, hour, 0), 0, 2, 0, -1, 2*hour)

		// A transaction with a bad take: EXEC replies its error among the
		// others' replies, and the others apply.
		txc, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "CL.THROTTLE", "tx", 1, 1, 0)
			p.Incr(ctx, "tx-count")
			return nil
		})
		if got := results(txc); err == nil || got[0] != "error: ERR period must be 1 second or more" || got[1] != int64(3) {
			t.Errorf("a transaction with a bad take: %v, %v; want its error and INCR 3", got, err)
		}

		// A transaction that aborts takes nothing.
		tx := rdb.TxPipeline()
		tx.Do(ctx, "CL.THROTTLE", "user", 4, 1, hour)
		tx.Do(ctx, "NOPE")
		if _, err := tx.Exec(ctx); err == nil || !strings.Contains(err.Error(), "EXECABORT") {
			t.Errorf("a transaction with an unknown command: %v, want EXECABORT", err)
		}
		near(t, "after the transaction", throttle(t, rdb, "user", 4, 1, hour, 0), 0, 5, 0, -1, 5*hour)
	})
}

// TestThrottleTransactionStores checks CL.THROTTLE in MULTI/EXEC on the
// stores that decide takes: on Pebble, PostgreSQL and Firestore (a
// transaction applier whose transaction is part of one commit) a take is
// one of the writes EXEC commits, decided in that commit; on Redis, whose
// transaction script carries no take, queueing it is refused with the
// reason and EXEC aborts, taking nothing.
func TestThrottleTransactionStores(t *testing.T) {
	ctx := context.Background()
	const hour = 3600
	for _, tc := range []struct {
		name  string
		open  func(t *testing.T) shardcounter.CounterStore
		inTxn bool
	}{
		{"pebble", func(t *testing.T) shardcounter.CounterStore {
			s, err := pebble.Open(ctx, filepath.Join(t.TempDir(), "db"), pebble.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, true},
		{"postgres", func(t *testing.T) shardcounter.CounterStore {
			s, err := postgres.Open(ctx, pgtest.MustDatabase(t), postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, true},
		{"firestore", func(t *testing.T) shardcounter.CounterStore {
			// A TxnApplier whose transaction is part of one commit: the
			// take joins it, as on the stores whose batch is one step.
			e, err := firestoretest.Start(firestoretest.Native)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(e.Stop)
			t.Setenv("FIRESTORE_EMULATOR_HOST", e.Addr)
			s, err := firestore.New(ctx, firestoretest.Project(t), "", firestore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, true},
		{"redis", func(t *testing.T) shardcounter.CounterStore {
			s, err := sredis.Open(ctx, "redis://"+redistest.MustStart(t).Addr, sredis.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := tc.open(t)
			t.Cleanup(func() { store.Close() })
			eng, err := engine.New(store, engine.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { eng.Close(ctx) })
			_, addr := MustServe(t, eng, server.Options{})
			rdb := MustClient(t, addr, 3, "")
			cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Do(ctx, "CL.THROTTLE", "k", 0, 1, hour)
				p.Do(ctx, "CL.THROTTLE", "k", 0, 1, hour)
				p.Incr(ctx, "n")
				return nil
			})
			if !tc.inTxn {
				wantPrefix(t, "CL.THROTTLE in MULTI on Redis", err, "EXECABORT")
				r := MustRaw(t, addr)
				r.send("MULTI\r\nCL.THROTTLE k 0 1 3600\r\nDISCARD\r\n")
				r.expect("+OK\r\n", "-ERR CL.THROTTLE cannot be part of a transaction: "+
					"this store applies a transaction with a script of its own, which carries no take (takes are a script of their own on Redis); send it before MULTI or after EXEC\r\n", "+OK\r\n")
				near(t, "a take after the refused transaction", throttle(t, rdb, "k", 0, 1, hour), 0, 1, 0, -1, hour)
				if n, err := rdb.Get(ctx, "n").Result(); err != redis.Nil {
					t.Errorf("GET n after the aborted transaction = %q, %v; want nothing applied", n, err)
				}
				return
			}
			if err != nil || len(cmds) != 3 {
				t.Fatalf("a transaction of takes: %v, %v", results(cmds), err)
			}
			for i, want := range [][2]int64{{0, -1}, {1, hour}} {
				v, err := cmds[i].(*redis.Cmd).Int64Slice()
				if err != nil || len(v) != 5 {
					t.Fatalf("take %d of the transaction: %v, %v", i, v, err)
				}
				near(t, fmt.Sprint("take ", i, " of the transaction"), [5]int64(v), want[0], 1, 0, want[1], hour)
			}
			near(t, "a take after the transaction", throttle(t, rdb, "k", 0, 1, hour), 1, 1, 0, hour, hour)
		})
	}
}
