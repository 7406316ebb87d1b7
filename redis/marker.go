package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Batch markers. Each slot group of a batch (the whole batch on one
// server) runs addScript with a marker key of its own, a random id in the
// group's slot, which the script writes with the group's results in the
// same atomic step as its writes. When the reply to the group is lost (a
// connection dropped, the server killed and restarted, a failover), the
// store runs the same script with the same marker again, on a new
// connection, until a reply comes or the write's deadline passes: if the
// first run had applied, the second finds the marker and returns the
// first one's results without changing anything; if not, it applies. So
// each group applies exactly once, and the writes are answered from what
// Redis holds instead of as outcome unknown. A group whose every item has
// a request id has no marker: its request ids make the second run apply
// only what the first did not, and answer the others duplicates.
//
// A marker lives markerTTLms, far past any write's deadline: it is read
// only while its writer waits. (Request ids, which clients send again
// later, are kept for the dedupe window.)
const markerTTLms = "600000"

// MaxResolve bounds how long a lost reply is settled for when the
// caller's context has no earlier deadline: past it, the writes are
// outcome unknown.
const MaxResolve = 10 * time.Second

// newMarkerSeed returns the random part of a store's markers: 12 bytes,
// so that markers of different stores (processes) never meet.
func newMarkerSeed() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
	return hex.EncodeToString(b[:])
}

// markerKey returns a new marker key in slot: the store's seed and a
// sequence number, unique without a random draw per batch.
func (s *CounterStore) markerKey(slot int) string {
	return s.prefix + "{" + slotTags()[slot] + "}m:" + s.markerSeed + ":" + strconv.FormatUint(s.markerSeq.Add(1), 36)
}

// lostReply reports whether err is a failure of the connection after the
// command was sent, not an answer of the server nor a connection that was
// never made (notExecuted): the command may or may not have run.
func lostReply(err error) bool {
	var re goredis.Error
	if errors.As(err, &re) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || notExecuted(err) {
		return false
	}
	return true
}

// resolveGroup runs a slot group's script (addScript, or txnScript) again
// with the same keys, marker last, and arguments, after what prelude
// queues (the shards of new counters, made unless they exist), until it
// gets the results or ctx ends (it then returns lost). It returns the
// results, and the error of the WAIT that followed them (see wait.go).
func (s *CounterStore) resolveGroup(ctx context.Context, script *goredis.Script, keys []string, args []any, lost error, prelude func(*nodeRuns)) ([]any, error, error) {
	c, waitErr, err := s.rerun(ctx, script, keys, args, lost, prelude)
	if err != nil {
		return nil, nil, err
	}
	res, err := c.Slice()
	return res, waitErr, err
}

// settleCreate settles a new counter's metadata script (createCounterScript
// on meta and its index bucket, with args) whose reply was lost: it runs
// it again until it answers or ctx ends (then it returns lost). Created
// now, or found created with this attempt's incarnation (by the first
// run), it returns 1; created by another writer, 0. It returns the WAIT's
// error beside, as resolveGroup does.
func (s *CounterStore) settleCreate(ctx context.Context, meta, bucket string, args []any, incarnation string, lost error) (int, error, error) {
	c, waitErr, err := s.rerun(ctx, createCounterScript, []string{meta, bucket}, args, lost, func(*nodeRuns) {})
	if err != nil {
		return 0, nil, err
	}
	ok, err := c.Int()
	if err == nil && ok == 0 {
		var inc string
		if inc, err = s.client.HGet(ctx, meta, fieldIncarnation).Result(); inc == incarnation {
			ok = 1 // the first run created it
		}
	}
	return ok, waitErr, err
}

// rerun runs script again, after what prelude queues, every 10 to 200
// milliseconds, until the server answers it or ctx ends (then it returns
// lost), at most MaxResolve: following a failover (MOVED), a restart
// (LOADING, NOSCRIPT), and replies lost again. It returns the answer, and
// the error of the WAIT that followed it.
func (s *CounterStore) rerun(ctx context.Context, script *goredis.Script, keys []string, args []any, lost error, prelude func(*nodeRuns)) (*goredis.Cmd, error, error) {
	ctx, cancel := context.WithTimeout(ctx, MaxResolve)
	defer cancel()
	pause := 10 * time.Millisecond
	for {
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, lost
		case <-t.C:
		}
		pause = min(2*pause, 200*time.Millisecond)
		nr := newNodeRuns(s)
		prelude(nr)
		run, at := nr.add(ctx, keys[0], func(p goredis.Pipeliner) *goredis.Cmd { return script.EvalSha(ctx, p, keys, args...) })
		if run == nil {
			continue // no node serves the slot yet (a failover)
		}
		s.runOnNodes(ctx, nr.runs)
		if err := nr.loadScripts(ctx); err != nil {
			continue
		}
		switch err := run.cmds[at].Err(); {
		case err == nil:
			s.stats.resolved.Add(1)
			return run.cmds[at], run.waitErr, nil
		case retryable(err), notExecuted(err), lostReply(err):
			s.refresh(ctx, err)
		default:
			return nil, nil, err // an answer: the script failed
		}
	}
}
