package server_test

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestIncrEx checks INCREX through go-redis on an engine over a real
// store: in bounds it adds, out of bounds it skips (the value as it is,
// 0 applied), with SATURATE it clamps, and bad arguments change nothing.
func TestIncrEx(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		steps := []struct {
			name string
			args []any
			want []any
		}{
			{"creates, 1 by default", []any{"INCREX", "k"}, []any{int64(1), int64(1)}},
			{"BYINT within", []any{"INCREX", "k", "BYINT", 4, "UBOUND", 5}, []any{int64(5), int64(4)}},
			{"above UBOUND: skipped", []any{"INCREX", "k", "UBOUND", 5}, []any{int64(5), int64(0)}},
			{"SATURATE clamps", []any{"INCREX", "k", "BYINT", 10, "UBOUND", 8, "SATURATE"}, []any{int64(8), int64(3)}},
			{"below LBOUND: skipped", []any{"INCREX", "k", "BYINT", -9, "LBOUND", 0}, []any{int64(8), int64(0)}},
			{"LBOUND SATURATE", []any{"INCREX", "k", "byint", -9, "lbound", 0, "saturate"}, []any{int64(0), int64(-8)}},
			{"outside, SATURATE moves toward the range", []any{"INCREX", "k", "LBOUND", 5, "UBOUND", 7, "SATURATE"}, []any{int64(5), int64(5)}},
			{"BYINT 0 reads", []any{"INCREX", "k", "BYINT", 0}, []any{int64(5), int64(0)}},
			{"past int64: skipped", []any{"INCREX", "k", "BYINT", math.MaxInt64}, []any{int64(5), int64(0)}},
			{"past int64, SATURATE", []any{"INCREX", "k", "BYINT", math.MaxInt64, "SATURATE"}, []any{int64(math.MaxInt64), int64(math.MaxInt64 - 5)}},
		}
		for _, s := range steps {
			got, err := rdb.Do(ctx, s.args...).Result()
			if err != nil || !reflect.DeepEqual(got, s.want) {
				t.Errorf("%s: got %v, %v; want %v", s.name, got, err, s.want)
			}
		}
		for _, c := range []struct {
			name string
			args []any
			want string
		}{
			{"BYFLOAT", []any{"INCREX", "k", "BYFLOAT", "1.5"}, "ERR BYFLOAT is not supported: counters hold integers, use BYINT"},
			{"EX 0", []any{"INCREX", "k", "EX", 0}, "ERR invalid expire time in 'increx' command"},
			{"EX and PERSIST", []any{"INCREX", "k", "EX", 10, "PERSIST"}, "ERR syntax error: give one of EX, PX, EXAT, PXAT and PERSIST"},
			{"ENX alone", []any{"INCREX", "k", "ENX"}, "ERR syntax error: ENX goes with EX, PX, EXAT, PXAT or PERSIST"},
			{"not an integer", []any{"INCREX", "k", "BYINT", "x"}, "ERR value is not an integer or out of range"},
			{"no value", []any{"INCREX", "k", "UBOUND"}, "ERR syntax error: ubound needs an integer"},
			{"twice", []any{"INCREX", "k", "BYINT", 1, "BYINT", 2}, "ERR syntax error: byint given twice"},
			{"inverted", []any{"INCREX", "k", "LBOUND", 3, "UBOUND", 2}, "ERR LBOUND is above UBOUND: give LBOUND ≤ UBOUND"},
			{"unknown", []any{"INCREX", "k", "NOPE"}, "ERR syntax error: unknown option 'NOPE': use BYINT, LBOUND, UBOUND or SATURATE"},
		} {
			wantErr(t, c.name, rdb.Do(ctx, c.args...).Err(), c.want)
		}
		if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "9223372036854775807" {
			t.Errorf("after the refused commands: GET = %q, %v; want them to change nothing", got, err)
		}
		// The deadline options change k's deadline in the increment's commit.
		if got, err := rdb.Do(ctx, "INCREX", "e", "EX", 100).Result(); err != nil || !reflect.DeepEqual(got, []any{int64(1), int64(1)}) {
			t.Errorf("INCREX EX: got %v, %v", got, err)
		}
		if ttl, err := rdb.TTL(ctx, "e").Result(); err != nil || ttl <= 0 || ttl > 100*time.Second {
			t.Errorf("after INCREX EX 100: TTL = %v, %v", ttl, err)
		}
		if err := rdb.Do(ctx, "INCREX", "e", "EX", 1000, "ENX").Err(); err != nil {
			t.Fatal(err)
		}
		if ttl, err := rdb.TTL(ctx, "e").Result(); err != nil || ttl <= 0 || ttl > 100*time.Second {
			t.Errorf("after INCREX EX 1000 ENX on a key with a deadline: TTL = %v, %v; want it unchanged", ttl, err)
		}
		if got, err := rdb.Do(ctx, "INCREX", "e", "PERSIST").Result(); err != nil || !reflect.DeepEqual(got, []any{int64(3), int64(1)}) {
			t.Errorf("INCREX PERSIST: got %v, %v", got, err)
		}
		if ttl, err := rdb.TTL(ctx, "e").Result(); err != nil || ttl != -1 {
			t.Errorf("after INCREX PERSIST: TTL = %v, %v; want -1 (no deadline)", ttl, err)
		}
		wantPrefix(t, "on a set", func() error {
			rdb.SAdd(ctx, "s", "a")
			return rdb.Do(ctx, "INCREX", "s").Err()
		}(), "WRONGTYPE Operation against a key holding the wrong kind of value")
	})
}

// TestIncrExMissingKey checks that a skipped INCREX on a missing key
// leaves it missing, as Redis 8.8 does: the reply is [0 0], no counter is
// created, and its deadline options set no deadline on it; alone and in
// a transaction. A saturated one creates it.
func TestIncrExMissingKey(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		incrExMissingKey(t, rdb, true)
	})
}

// incrExMissingKey is TestIncrExMissingKey's check, in a transaction too
// when txn.
func incrExMissingKey(t *testing.T, rdb *redis.Client, txn bool) {
	ctx := context.Background()
	gone := func(what string) {
		t.Helper()
		if n, err := rdb.Exists(ctx, "m").Result(); err != nil || n != 0 {
			t.Fatalf("%s: EXISTS m = %d, %v; want 0", what, n, err)
		}
		if d, err := rdb.TTL(ctx, "m").Result(); err != nil || d != -2 {
			t.Fatalf("%s: TTL m = %v, %v; want -2 (no key)", what, d, err)
		}
	}
	if got, err := rdb.Do(ctx, "INCREX", "m", "BYINT", 5, "UBOUND", 3, "EX", 100).Result(); err != nil || !reflect.DeepEqual(got, []any{int64(0), int64(0)}) {
		t.Fatalf("INCREX m BYINT 5 UBOUND 3 EX 100 on a missing key: %v, %v; want [0 0]", got, err)
	}
	gone("after a skipped INCREX")
	if got, err := rdb.Do(ctx, "INCREX", "m", "BYINT", -1, "LBOUND", 0).Result(); err != nil || !reflect.DeepEqual(got, []any{int64(0), int64(0)}) {
		t.Fatalf("INCREX m BYINT -1 LBOUND 0 on a missing key: %v, %v; want [0 0]", got, err)
	}
	gone("after a skipped INCREX below LBOUND")
	if txn {
		cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "INCREX", "m", "BYINT", 5, "UBOUND", 3, "PX", 100_000)
			p.Exists(ctx, "m")
			return nil
		})
		if got := results(cmds); err != nil || !reflect.DeepEqual(got, []any{[]any{int64(0), int64(0)}, int64(0)}) {
			t.Fatalf("a skipped INCREX and EXISTS in a transaction: %v, %v; want [[0 0] 0]", got, err)
		}
		gone("after a skipped INCREX in a transaction")
	}
	if got, err := rdb.Do(ctx, "INCREX", "m", "BYINT", 5, "UBOUND", 3, "SATURATE", "EX", 100).Result(); err != nil || !reflect.DeepEqual(got, []any{int64(3), int64(3)}) {
		t.Fatalf("INCREX m BYINT 5 UBOUND 3 SATURATE EX 100 on a missing key: %v, %v; want [3 3]", got, err)
	}
	if d, err := rdb.TTL(ctx, "m").Result(); err != nil || d <= 0 || d > 100*time.Second {
		t.Fatalf("after a saturated INCREX EX 100: TTL m = %v, %v; want (0, 100s]", d, err)
	}
}

// TestIncrExTransaction checks INCREX inside MULTI/EXEC, each reply as a
// lone INCREX's at its place in the transaction (bounded, skipped,
// saturated, with EX joined), and the deadline options of a skipped
// increment left undone, alone and in a transaction, as Redis 8.8 leaves
// the TTL of a skipped increment untouched; a saturated increment that
// applies 0 is not skipped and sets it.
func TestIncrExTransaction(t *testing.T) {
	eachProto(t, func(t *testing.T, rdb *redis.Client, proto int) {
		ctx := context.Background()
		ttl := func(key string) time.Duration {
			t.Helper()
			d, err := rdb.TTL(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "INCREX", "k", "BYINT", 3, "UBOUND", 5, "EX", 100)
			p.Do(ctx, "INCREX", "k", "BYINT", 3, "UBOUND", 5)
			p.Do(ctx, "INCREX", "k", "BYINT", 3, "UBOUND", 5, "SATURATE")
			p.Get(ctx, "k")
			p.Do(ctx, "INCREX", "k", "BYINT", -9, "LBOUND", 0)
			p.Do(ctx, "INCREX", "k", "BYINT", -1, "LBOUND", 0)
			p.Incr(ctx, "k")
			return nil
		})
		want := []any{[]any{int64(3), int64(3)}, []any{int64(3), int64(0)}, []any{int64(5), int64(2)}, "5",
			[]any{int64(5), int64(0)}, []any{int64(4), int64(-1)}, int64(5)}
		if got := results(cmds); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("INCREX in a transaction = %v, %v\nwant %v", got, err, want)
		}
		if d := ttl("k"); d <= 0 || d > 100*time.Second {
			t.Errorf("TTL after INCREX EX 100 in a transaction = %v, want (0, 100s]", d)
		}

		// A skipped increment leaves the deadline as it was: alone, and
		// in a transaction.
		if got, err := rdb.Do(ctx, "INCREX", "s", "EX", 100).Result(); err != nil || !reflect.DeepEqual(got, []any{int64(1), int64(1)}) {
			t.Fatalf("INCREX s EX 100: %v, %v", got, err)
		}
		for _, opt := range [][]any{{"EX", 1000}, {"PX", 1000000}, {"PERSIST"}} {
			args := append([]any{"INCREX", "s", "BYINT", 10, "UBOUND", 5}, opt...)
			if got, err := rdb.Do(ctx, args...).Result(); err != nil || !reflect.DeepEqual(got, []any{int64(1), int64(0)}) {
				t.Errorf("%v: %v, %v; want [1 0], skipped", args, got, err)
			}
			if d := ttl("s"); d <= 0 || d > 100*time.Second {
				t.Errorf("TTL after a skipped %v = %v, want it left in (0, 100s]", args, d)
			}
			cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Do(ctx, args...)
				p.Do(ctx, "INCREX", "s", "BYINT", 0)
				return nil
			})
			if got := results(cmds); err != nil || !reflect.DeepEqual(got, []any{[]any{int64(1), int64(0)}, []any{int64(1), int64(0)}}) {
				t.Errorf("MULTI %v: %v, %v; want [1 0] skipped", args, got, err)
			}
			if d := ttl("s"); d <= 0 || d > 100*time.Second {
				t.Errorf("TTL after a skipped %v in a transaction = %v, want it left in (0, 100s]", args, d)
			}
		}
		// Saturated at the bound it applies 0 but is not skipped: the
		// deadline is set.
		if got, err := rdb.Do(ctx, "INCREX", "s", "BYINT", 10, "UBOUND", 1, "SATURATE", "EX", 1000).Result(); err != nil || !reflect.DeepEqual(got, []any{int64(1), int64(0)}) {
			t.Errorf("INCREX s saturated at its bound: %v, %v; want [1 0]", got, err)
		}
		if d := ttl("s"); d <= 100*time.Second {
			t.Errorf("TTL after a saturated INCREX EX 1000 = %v, want it set above 100s", d)
		}
		// A skipped increment of a missing key leaves it missing, with no
		// deadline (docs/RESP.md).
		cmds, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "INCREX", "fresh", "BYINT", 10, "UBOUND", 5, "EX", 100)
			return nil
		})
		if got := results(cmds); err != nil || !reflect.DeepEqual(got, []any{[]any{int64(0), int64(0)}}) {
			t.Errorf("a skipped INCREX of a missing key in a transaction: %v, %v; want [0 0]", got, err)
		}
		if d := ttl("fresh"); d != -2 {
			t.Errorf("TTL after a skipped INCREX EX of a missing key = %v, want -2 (no key)", d)
		}
	})
}
