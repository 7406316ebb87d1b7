package redis

import (
	"errors"
	"fmt"
	"io"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
)

// replyErr is a Redis error reply, as go-redis returns one.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

var _ goredis.Error = replyErr("")

// TestStoreErr checks the classification of the store's failures: a
// refusal of the server is unavailable, a lost reply to a write outcome
// unknown, and none of them internal.
func TestStoreErr(t *testing.T) {
	for _, c := range []struct {
		err   error
		write bool
		code  string
	}{
		{replyErr("ERR max number of clients reached"), true, shardcounter.EUNAVAILABLE},
		{replyErr("NOAUTH Authentication required."), false, shardcounter.EUNAVAILABLE},
		{replyErr("MISCONF Redis is configured to save RDB snapshots"), true, shardcounter.EUNAVAILABLE},
		{replyErr("LOADING Redis is loading the dataset in memory"), true, shardcounter.EUNAVAILABLE},
		{fmt.Errorf("read: %w", io.EOF), true, shardcounter.EOUTCOMEUNKNOWN},
		{fmt.Errorf("read: %w", io.EOF), false, shardcounter.EUNAVAILABLE},
	} {
		err := storeErr("apply", c.err, c.write)
		if got := shardcounter.ErrorCode(err); got != c.code {
			t.Errorf("storeErr(%v, write %v) = %v (code %s), want %s", c.err, c.write, err, got, c.code)
		}
		if !errors.Is(err, &shardcounter.Error{Code: c.code}) {
			t.Errorf("storeErr(%v) = %v: not an *Error of code %s", c.err, err, c.code)
		}
	}
}
