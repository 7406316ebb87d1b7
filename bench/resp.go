package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	respserver "github.com/shardcounter/shardcounter/resp/server"
)

// respService is the resp path: the bench's own load generator over
// go-redis against a shardcounter RESP port (Config.RESP, or a server
// over Config.Store that the run starts in this process, as the http
// path does), one connection per client,
// sending each client's commands one at a time or Config.Pipeline per
// round trip. Writes are INCR and DECR (a missing counter is created by
// them, at the server's default shard count, as Redis does) and SADD/SREM on
// distinct counters; reads are GET (SCARD) and, on a timeline, MGET (a
// pipeline of SCARD). Counters INCRBY cannot make as the run needs them
// (distinct, bounded) are made with SC.CREATE before their first write.
type respService struct {
	c    *goredis.Client
	spec shardcounter.Spec
	// create says whether a counter is made with SC.CREATE before its
	// first write; made holds those made.
	create bool
	made   sync.Map
	// stop, when the run started the server, stops it and its engine;
	// eng is that engine.
	stop func(ctx context.Context) error
	eng  *engine.Engine
}

// startRESP connects to cfg.RESP, or starts a RESP server over cfg.Store
// on a loopback port and connects to it, and checks that it answers.
func startRESP(ctx context.Context, cfg Config, spec shardcounter.Spec) (*respService, error) {
	s := &respService{spec: spec}
	addr := cfg.RESP
	if addr == "" {
		eng, err := engine.New(cfg.Store, engineConfig(cfg, spec, 0))
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			eng.Close(ctx) //nolint:errcheck // nothing was written
			return nil, fmt.Errorf("bench: listen on loopback: %w", err)
		}
		rs := respserver.New(eng, respserver.Options{Engine: eng.Stats(), Logger: slog.New(slog.DiscardHandler)})
		// Serve returns ErrServerClosed at Shutdown; any other failure
		// shows as the run's command errors.
		go rs.Serve(ln) //nolint:errcheck
		addr, s.eng = ln.Addr().String(), eng
		s.stop = func(ctx context.Context) error {
			err := rs.Shutdown(ctx)
			if cerr := eng.Close(ctx); err == nil {
				err = cerr
			}
			return err
		}
	}
	s.c = goredis.NewClient(&goredis.Options{
		Addr:     addr,
		Password: cfg.Token,
		// One connection per client, made before the clock starts.
		PoolSize: cfg.Clients, MinIdleConns: cfg.Clients,
		// As the HTTP load generator's: a DEL of many counters deletes
		// them one by one.
		ReadTimeout: respTimeout, WriteTimeout: respTimeout,
	})
	if err := s.c.Ping(ctx).Err(); err != nil {
		s.close(ctx) //nolint:errcheck // the ping's error says more
		return nil, fmt.Errorf("bench: RESP port %s: %w", addr, err)
	}
	// INCR makes plain sum counters, as Redis does; the others need
	// SC.CREATE.
	s.create = !(spec.Kind != shardcounter.KindDistinct && spec.Min == nil && spec.Max == nil)
	return s, nil
}

// close closes the client and stops the server the run started.
func (s *respService) close(ctx context.Context) error {
	err := s.c.Close()
	if s.stop != nil {
		if serr := s.stop(ctx); err == nil {
			err = serr
		}
	}
	return err
}

func (s *respService) process() string {
	if s.stop != nil {
		return selfMemory{}.process()
	}
	return "server"
}

// rss reads this process's memory when it serves the run, else INFO
// memory's used_memory_rss, Redis's name for it, when the server gives
// one.
func (s *respService) rss(ctx context.Context) (int64, bool, error) {
	if s.stop != nil {
		return selfMemory{}.rss(ctx)
	}
	return infoRSS(ctx, s.c)
}

// split is selfMemory's when this process serves the run; a server's
// INFO does not say.
func (s *respService) split() (anon, files int64, ok bool) {
	if s.stop != nil {
		return selfMemory{}.split()
	}
	return 0, 0, false
}

// infoRSS reads used_memory_rss from a RESP server's INFO memory.
func infoRSS(ctx context.Context, c *goredis.Client) (int64, bool, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, false, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory_rss:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, false, fmt.Errorf("INFO memory: used_memory_rss %q is not a number", v)
			}
			return n, true, nil
		}
	}
	return 0, false, nil
}

// ensure makes counter id with SC.CREATE before its first write, when
// the run's counters need it.
func (s *respService) ensure(ctx context.Context, id string) error {
	if !s.create {
		return nil
	}
	if _, ok := s.made.Load(id); ok {
		return nil
	}
	args := []any{"SC.CREATE", id, "SHARDS", s.spec.Shards}
	if s.spec.Kind == shardcounter.KindDistinct {
		args = append(args, "KIND", "distinct")
	}
	if s.spec.Min != nil {
		args = append(args, "MIN", *s.spec.Min)
	}
	if s.spec.Max != nil {
		args = append(args, "MAX", *s.spec.Max)
	}
	if err := s.c.Do(ctx, args...).Err(); err != nil && !strings.HasPrefix(err.Error(), "EXISTS") {
		return fmt.Errorf("SC.CREATE %s: %w", id, err)
	}
	s.made.Store(id, true)
	return nil
}

// queue adds op's command for counter ids to p and returns a function
// that reads its result into op once p has run.
func (s *respService) queue(ctx context.Context, p goredis.Cmdable, op *operation, id func(int) string) func() {
	distinct := s.spec.Kind == shardcounter.KindDistinct
	switch op.kind {
	case opWrite:
		k := id(op.counter)
		if err := s.ensure(ctx, k); err != nil {
			op.err = err
			return func() {}
		}
		var cmd *goredis.IntCmd
		switch {
		case distinct && op.delta > 0:
			cmd = p.SAdd(ctx, k, memberName(op.member))
		case distinct:
			cmd = p.SRem(ctx, k, memberName(op.member))
		case op.delta == 1:
			cmd = p.Incr(ctx, k)
		case op.delta == -1:
			cmd = p.Decr(ctx, k)
		default:
			cmd = p.IncrBy(ctx, k, op.delta)
		}
		return func() {
			n, err := cmd.Result()
			op.err = respError(err)
			op.changed = err == nil && (!distinct || n == 1)
		}
	case opRead:
		if distinct {
			cmd := p.SCard(ctx, id(op.counter))
			return func() { op.err = respError(cmd.Err()) }
		}
		cmd := p.Get(ctx, id(op.counter))
		return func() {
			if err := cmd.Err(); !errors.Is(err, goredis.Nil) {
				op.err = respError(err)
			}
		}
	default:
		if distinct {
			cmds := make([]*goredis.IntCmd, len(op.counters))
			for i, c := range op.counters {
				cmds[i] = p.SCard(ctx, id(c))
			}
			return func() {
				for _, cmd := range cmds {
					if err := cmd.Err(); err != nil {
						op.err = respError(err)
					}
				}
			}
		}
		keys := make([]string, len(op.counters))
		for i, c := range op.counters {
			keys[i] = id(c)
		}
		cmd := p.MGet(ctx, keys...)
		return func() {
			vals, err := cmd.Result()
			if err == nil && len(vals) != len(keys) {
				err = fmt.Errorf("MGET of %d keys answered %d values", len(keys), len(vals))
			}
			op.err = respError(err)
		}
	}
}

// do performs ops: one command (or one timeline read of SCARDs) at a
// time, or all of them in one pipeline.
func (s *respService) do(ctx context.Context, ops []operation, id func(int) string) {
	if len(ops) == 1 && (ops[0].kind != opReadBatch || s.spec.Kind != shardcounter.KindDistinct) {
		s.queue(ctx, s.c, &ops[0], id)()
		return
	}
	p := s.c.Pipeline()
	reads := make([]func(), len(ops))
	for i := range ops {
		reads[i] = s.queue(ctx, p, &ops[i], id)
	}
	p.Exec(ctx) //nolint:errcheck // each command's error is read below
	for _, read := range reads {
		read()
	}
}

// respError turns a RESP error reply into the domain's error where the
// run counts it: a write a bounded counter refused is ErrOutOfRange. A
// bad number (ERR value is not an integer or out of range) stays an
// error.
func respError(err error) error {
	var re goredis.Error
	if err == nil || !errors.As(err, &re) {
		return err
	}
	msg := strings.ToLower(err.Error())
	if strings.Contains(msg, "not an integer") {
		return err
	}
	if strings.Contains(msg, "out of range") || strings.Contains(msg, "would leave the counter's bounds") || strings.Contains(msg, "would overflow") {
		return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "%s", err.Error())
	}
	return err
}

// values reads back the counters' values: MGET, or SCARD on distinct
// counters, 1000 keys a round trip.
func (s *respService) values(ctx context.Context, keys []string) (int64, error) {
	var total int64
	if s.spec.Kind == shardcounter.KindDistinct {
		p := s.c.Pipeline()
		cmds := make([]*goredis.IntCmd, len(keys))
		for i, k := range keys {
			cmds[i] = p.SCard(ctx, k)
		}
		if _, err := p.Exec(ctx); err != nil {
			return 0, err
		}
		for _, c := range cmds {
			total += c.Val()
		}
		return total, nil
	}
	vals, err := s.c.MGet(ctx, keys...).Result()
	if err != nil {
		return 0, err
	}
	return sumStrings(vals)
}

// sumStrings adds up MGET's values; nil (a missing key) is 0.
func sumStrings(vals []any) (int64, error) {
	var total int64
	for _, v := range vals {
		if v == nil {
			continue
		}
		str, ok := v.(string)
		if !ok {
			return 0, fmt.Errorf("MGET answered %T, not a string", v)
		}
		n, err := strconv.ParseInt(str, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("a key holds %q, not a number", str)
		}
		total += n
	}
	return total, nil
}

// keysPerCall is how many keys one MGET, DEL or pipeline of SCARDs of the
// read-back and clean-up carries: shardcounter deletes counters one by
// one, so a DEL of this many must answer within respTimeout.
const keysPerCall = 100

// respTimeout bounds a RESP command's round trip.
const respTimeout = 30 * time.Second

// respTarget drives a RESP server (the resp path, and the Redis peers,
// which are the same commands against Redis itself) on cfg.Counters
// keys named prefix+i. keep leaves the keys in place after the run.
func respTarget(cfg Config, s *respService, prefix string, keep bool) target {
	id := func(i int) string { return prefix + strconv.Itoa(i) }
	written := make([]atomic.Bool, cfg.Counters)
	chunks := func(ctx context.Context, fn func(ctx context.Context, keys []string) error) error {
		return forChunks(ctx, written, keysPerCall, cfg.Clients, func(ctx context.Context, idx []int) error {
			keys := make([]string, len(idx))
			for j, i := range idx {
				keys[j] = id(i)
			}
			return fn(ctx, keys)
		})
	}
	return target{
		do: func(ctx context.Context, ops []operation) {
			for i := range ops {
				if ops[i].kind == opWrite && !written[ops[i].counter].Load() {
					// Before the write, so a failed reply still gets cleaned up.
					written[ops[i].counter].Store(true)
				}
			}
			s.do(ctx, ops, id)
		},
		prefill: func(ctx context.Context, is []int) (int64, error) {
			ops := make([]operation, len(is))
			for j, i := range is {
				ops[j] = operation{kind: opWrite, counter: i, delta: 1}
				written[i].Store(true)
			}
			s.do(ctx, ops, id)
			var n int64
			for j := range ops {
				if ops[j].err != nil {
					return n, ops[j].err
				}
				if ops[j].changed {
					n++
				}
			}
			return n, nil
		},
		total: func(ctx context.Context) (int64, error) {
			var total atomic.Int64
			err := chunks(ctx, func(ctx context.Context, keys []string) error {
				n, err := s.values(ctx, keys)
				total.Add(n)
				return err
			})
			return total.Load(), err
		},
		touched: func() int64 { return countSet(written) },
		// Read back and clean up through the server, which runs until
		// clean-up: GET and MGET are strong reads, so every acknowledged
		// write is in them.
		cleanup: func(ctx context.Context) error {
			var err error
			if !keep {
				err = chunks(ctx, func(ctx context.Context, keys []string) error {
					return s.c.Del(ctx, keys...).Err()
				})
			}
			if cerr := s.close(ctx); err == nil {
				err = cerr
			}
			return err
		},
	}
}
