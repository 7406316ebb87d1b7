package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/shardcounter/shardcounter"
)

// Peers, as a run's "peer" names them.
const (
	PeerRedisIncr      = "redis-incr"          // INCR (DECR) of one key per counter of a Redis server; MGET for a timeline
	PeerRedisSadd      = "redis-sadd"          // SADD (SREM) to one set per distinct counter; SCARD to read
	PeerPostgresUpdate = "postgres-update"     // UPDATE t SET n = n + 1 of one row per counter
	PeerPostgresInsert = "postgres-insert"     // INSERT ... ON CONFLICT DO NOTHING of (counter, member); count(*) to read
	PeerHTTPBare       = "http-bare"           // a bare net/http handler doing one atomic add
	PeerFirestore      = "firestore-increment" // seed 000's way: an Increment of a random shard document per write
)

// Peer is a peer to measure and the server it drives: a redis:// URL for
// the Redis peers, a PostgreSQL DSN for the PostgreSQL peers, a
// firestore:// DSN for firestore-increment, nothing for http-bare, which
// this process serves.
type Peer struct {
	Kind   string
	Target string
}

// peerKinds says which counter kind each peer counts; http-bare, which
// counts nothing, goes with both.
var peerKinds = map[string]shardcounter.Kind{
	PeerRedisIncr:      shardcounter.KindSum,
	PeerPostgresUpdate: shardcounter.KindSum,
	PeerRedisSadd:      shardcounter.KindDistinct,
	PeerPostgresInsert: shardcounter.KindDistinct,
	PeerHTTPBare:       "",
	PeerFirestore:      shardcounter.KindSum,
}

// PeerFits checks that a peer measures a kind of counter that cfg's
// variants count, and can send cfg's pipeline; the error says which peer
// to use instead.
func PeerFits(peer string, cfg Config) error {
	cfg = cfg.withDefaults()
	kinds := map[shardcounter.Kind]bool{}
	for _, v := range cfg.Variants {
		kinds[v.kind()] = true
	}
	kind, ok := peerKinds[peer]
	switch {
	case !ok:
		return fmt.Errorf("bench: peer %q is unknown: use %s, %s, %s, %s, %s or %s", peer, PeerRedisIncr, PeerRedisSadd, PeerPostgresUpdate, PeerPostgresInsert, PeerHTTPBare, PeerFirestore)
	case kind == shardcounter.KindSum && !kinds[kind]:
		return fmt.Errorf("bench: peer %s adds numbers: for distinct counters use %s and %s", peer, PeerRedisSadd, PeerPostgresInsert)
	case kind == shardcounter.KindDistinct && !kinds[kind]:
		return fmt.Errorf("bench: peer %s counts members: it goes with distinct counters; for sums use %s and %s", peer, PeerRedisIncr, PeerPostgresUpdate)
	case cfg.Pipeline > 1 && !strings.HasPrefix(peer, "redis-"):
		return fmt.Errorf("bench: peer %s sends one request at a time: pipelining is for the resp path and the Redis peers", peer)
	}
	return nil
}

// Peers measures each peer with cfg's clients, duration and workload, in
// order: what a user would run instead of a shardcounter counter. Each
// counter of the workload is one Redis key or one table's rows, so with
// Counters > 1 the peers spread their writes as the counters do. A peer's
// run is verified as a path's is: the keys' or rows' final sum equals
// what the acknowledged writes add up to. Runs name the settings that
// bound the peer's throughput (appendfsync, synchronous_commit).
func Peers(ctx context.Context, cfg Config, peers []Peer) ([]Run, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, p := range peers {
		if err := PeerFits(p.Kind, cfg); err != nil {
			return nil, err
		}
	}
	kind := cfg.Variants[0].kind() // the bare peer's
	var runs []Run
	for _, p := range peers {
		var t target
		var mem memoryProbe
		var err error
		cfg := cfg
		if cfg.Kind = peerKinds[p.Kind]; cfg.Kind == "" {
			cfg.Kind = kind
		}
		run := Run{Path: PathPeer, Peer: p.Kind}
		switch p.Kind {
		case PeerRedisIncr, PeerRedisSadd:
			t, mem, err = redisPeer(ctx, cfg, p, &run)
		case PeerPostgresUpdate:
			t, err = postgresUpdatePeer(ctx, cfg, p.Target, &run)
		case PeerPostgresInsert:
			t, err = postgresInsertPeer(ctx, cfg, p.Target, &run)
		case PeerHTTPBare:
			t, err = barePeer(cfg, &run)
		case PeerFirestore:
			t, err = firestoreDirectPeer(ctx, cfg, p, &run)
		}
		if err != nil {
			return runs, err
		}
		if err := measureRun(ctx, cfg, t, mem, nil, &run); err != nil {
			return runs, err
		}
		runs = append(runs, run)
	}
	return runs, nil
}

// settingsName is the part of a peer run's name that says its settings,
// such as "appendfsync=always".
func settingsName(settings map[string]string, keys ...string) string {
	var parts []string
	for _, k := range keys {
		if v, ok := settings[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}

// barePeer serves the bare handler on a loopback port of this process and
// drives it with the http path's load generator and requests.
func barePeer(cfg Config, run *Run) (target, error) {
	h := &bareHandler{}
	srv, url, err := serveLoopback(h)
	if err != nil {
		return target{}, err
	}
	run.Store, run.Name = "http", "peer/http-bare"
	// The counter ids go in the path as for the http path, so both build
	// the same requests; the handler ignores them.
	svc := &httpService{lg: newLoadgen(url, "", cfg.Clients)}
	id := func(i int) string { return strconv.Itoa(i) }
	return target{
		do: oneByOne(
			func(ctx context.Context, op *operation) (err error) {
				op.changed, err = svc.write(ctx, writeOf(id(op.counter), op, cfg.Kind))
				return err
			},
			func(ctx context.Context, op *operation) error {
				return svc.read(ctx, id(op.counter), shardcounter.Strong)
			},
			func(ctx context.Context, op *operation) error {
				// The handler answers no readings: send the request and
				// take any 200.
				body, _ := json.Marshal(readsRequest{make([]string, len(op.counters)), shardcounter.Strong})
				return svc.lg.do(ctx, http.MethodPost, "/v1/reads", body, nil)
			}),
		// Nothing to create: every counter is the one atomic.
		prefill: func(context.Context, []int) (int64, error) { return 0, nil },
		total:   func(context.Context) (int64, error) { return h.n.Load(), nil },
		touched: func() int64 { return 0 },
		cleanup: func(ctx context.Context) error {
			svc.lg.close()
			return srv.Shutdown(ctx)
		},
	}, nil
}
