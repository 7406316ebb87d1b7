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
