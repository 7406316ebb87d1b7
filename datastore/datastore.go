// Package datastore is a shardcounter.CounterStore on Firestore in
// Datastore mode (Cloud Datastore), in seed 002's layout: a counter's
// shards are entities of kind IK_CounterShardEntity (a DSN option) keyed
// TARGET_N, N from 1 to the shard count, with the properties target (the
// counter id) and count, as the seed's CounterShardDS reads and writes
// them. The seed keeps the shard count in code; this store keeps it, with
// the rest of the counter's spec, in an entity of its own beside the
// shards (kind SC_Counter, keyed by the escaped id), and the counter's
// members, window buckets and request ids in child entities of that one
// (kinds SC_Member, SC_Bucket, SC_Request). docs/FIRESTORE.md lists them.
//
// Every write is a Datastore transaction that reads what it decides on
// (the counter entity, the shards it writes, request ids, members,
// buckets) and commits its writes atomically: the seed's increment is a
// read-modify-write without one and loses updates under concurrency
// (seed_test.go shows it). A transaction the database aborts for
// contention applies nothing and is tried again with backoff.
//
// Totals stay exact within int64 without reading every shard: while each
// of a counter's n shards stays within ±MaxInt64/n their sum cannot
// overflow, so a write reads only its own shard. A write that would take a
// shard past that zone marks the counter entity wide (in the same
// transaction); from then on, and always for a counter with bounds,
// writes read every shard and check the total.
package datastore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/datastore"
	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter"
)

// Kinds this store writes beside the seed's shard entities.
const (
	counterKind = "SC_Counter"
	memberKind  = "SC_Member"
	bucketKind  = "SC_Bucket"
	requestKind = "SC_Request"
)

// DefaultKind is the kind of the shard entities, as seed 002 names it
// (the PHP class IK\CounterShardEntity).
const DefaultKind = "IK_CounterShardEntity"

// DefaultShardWriteInterval is the pace of commits per shard entity the
// engine keeps on this store unless told otherwise: about one write a
// second per entity, as on Firestore.
const DefaultShardWriteInterval = time.Second

// Options configure a CounterStore. The zero value uses the defaults.
type Options struct {
	// Kind is the shard entities' kind. Default DefaultKind.
	Kind string
	// Namespace is the Datastore namespace of every entity. Default "".
	Namespace string
	// ShardWriteInterval is how often the engine may commit to one shard
	// entity (ShardWriteInterval()); 0 leaves the default, a negative
	// value turns pacing off. Default DefaultShardWriteInterval.
	ShardWriteInterval time.Duration
	// Now is the store's clock: created_at, the age of request ids and
	// the window bucket of a write follow it. Default time.Now.
	Now func() time.Time
	// DedupeWindow is how long a request id is remembered. Default
	// shardcounter.DefaultDedupeWindow; SetDedupeWindow changes it.
	DedupeWindow time.Duration
}

// CounterStore is a shardcounter.CounterStore on Firestore in Datastore
// mode, in seed 002's layout (see the package doc). It is safe for
// concurrent use, also by several processes on one database.
type CounterStore struct {
	client    *datastore.Client
	project   string
	kind      string
	namespace string
	interval  time.Duration
	now       func() time.Time
	window    atomic.Int64 // dedupe window, ns

	// shards remembers each counter's shard count and whether its writes
	// read every shard, so that a transaction reads what it needs in one
	// lookup; the transaction checks the guess against the counter entity.
	shards *lru.Cache[string, *counterEntity]
	locks  stripes
	stats  Stats

	expiryMu   sync.Mutex
	nextExpiry time.Time // no request id expires before it, as far as this process knows
}

var (
	_ shardcounter.CounterStore     = (*CounterStore)(nil)
	_ shardcounter.RequestIDExpirer = (*CounterStore)(nil)
	_ shardcounter.ShardPacer       = (*CounterStore)(nil)
)

// Stats are the store's running totals, exported in /metrics.
type Stats struct {
	// Conflicts counts transactions the database aborted for contention
	// (another writer came first), tried again.
	Conflicts atomic.Int64
	// Commits counts commits of shard entities: every shard a committed
	// batch wrote counts once.
	Commits atomic.Int64
	// Resolved counts batches whose commit got no clear answer and whose
	// marker showed them applied (see marker.go).
	Resolved atomic.Int64

	onCommit atomic.Pointer[func(counter string, shard int)]
}

const cacheSize = 100_000

// Config is a parsed datastore:// DSN.
type Config struct {
	Project string
	Options
}

// ParseDSN reads datastore://PROJECT[?kind=K&namespace=NS&shard_write_interval=D].
func ParseDSN(dsn string) (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, shardcounter.Errorf(shardcounter.EINVALID, "store %q: "+format+": write datastore://PROJECT[?kind=IK_CounterShardEntity&namespace=NS&shard_write_interval=1s]", append([]any{dsn}, args...)...)
	}
	u, err := url.Parse(dsn)
	if err != nil || !strings.EqualFold(u.Scheme, "datastore") {
		return bad("not a datastore:// URL")
	}
	if u.User != nil || u.Port() != "" || u.Fragment != "" || u.Opaque != "" {
		return bad("a datastore DSN has no user, password, port or fragment")
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		return bad("a datastore DSN has no path (%q): give the namespace as ?namespace=", p)
	}
	c := Config{Project: u.Host}
	if !validName(c.Project, 63) {
		return bad("project %q is not a project id (letters, digits and hyphens)", c.Project)
	}
	for k, vs := range u.Query() {
		if len(vs) != 1 {
			return bad("option %s given %d times", k, len(vs))
		}
		v := vs[0]
		switch k {
		case "kind":
			if !validName(v, 100) || strings.HasPrefix(v, "__") || strings.HasPrefix(v, "SC_") {
				return bad("kind %q is not a kind name (letters, digits, _ and -; not __…__ nor SC_…, which are taken)", v)
			}
			c.Kind = v
		case "namespace":
			if v != "" && (!validName(v, 100) || strings.HasPrefix(v, "__")) {
				return bad("namespace %q is not a namespace (letters, digits, _ and -)", v)
			}
			c.Namespace = v
		case "shard_write_interval":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > time.Hour {
				return bad("shard_write_interval %q is not a duration from 0 to 1h (0 turns pacing off)", v)
			}
			c.ShardWriteInterval = d
			if d == 0 {
				c.ShardWriteInterval = -1
			}
		default:
			return bad("option %q is unknown (kind, namespace, shard_write_interval)", k)
		}
	}
	return c, nil
}

func validName(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// Open opens the store a datastore:// DSN names. With
// DATASTORE_EMULATOR_HOST set, Google's client talks to that emulator;
// otherwise to the project's database with Application Default
// Credentials. It pings the database before it returns.
func Open(ctx context.Context, dsn string) (*CounterStore, error) {
	c, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return New(ctx, c.Project, c.Options)
}

// New opens the store on project's database.
func New(ctx context.Context, project string, opts Options) (*CounterStore, error) {
	client, err := datastore.NewClient(ctx, project, option.WithGRPCDialOption(grpc.WithDefaultServiceConfig(serviceConfig)))
	if err != nil {
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "datastore: connect to project %s: %v (set DATASTORE_EMULATOR_HOST for the emulator, or Application Default Credentials for Google Cloud)", project, err)
	}
	s := &CounterStore{client: client, project: project, kind: opts.Kind, namespace: opts.Namespace, now: opts.Now}
	if s.kind == "" {
		s.kind = DefaultKind
	}
	if s.now == nil {
		s.now = time.Now
	}
	switch {
	case opts.ShardWriteInterval == 0:
		s.interval = DefaultShardWriteInterval
	case opts.ShardWriteInterval > 0:
		s.interval = opts.ShardWriteInterval
	}
	s.shards, _ = lru.New[string, *counterEntity](cacheSize)
	s.SetDedupeWindow(opts.DedupeWindow)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.Ping(pctx); err != nil {
		client.Close()
		return nil, err
	}
	return s, nil
}

// Client returns the Datastore client, for tests and for apps that write
// the seed's way beside the store.
func (s *CounterStore) Client() *datastore.Client { return s.client }

// Kind returns the shard entities' kind.
func (s *CounterStore) Kind() string { return s.kind }

// ShardKey returns the key of shard i (from 0) of counter id: the seed's
// TARGET_N, N = i+1.
func (s *CounterStore) ShardKey(id string, i int) *datastore.Key {
	k := datastore.NameKey(s.kind, fmt.Sprintf("%s_%d", id, i+1), nil)
	k.Namespace = s.namespace
	return k
}

func (s *CounterStore) counterKey(id string) *datastore.Key {
	k := datastore.NameKey(counterKind, Escape(id), nil)
	k.Namespace = s.namespace
	return k
}

func childKey(parent *datastore.Key, kind, name string) *datastore.Key {
	k := datastore.NameKey(kind, name, parent)
	k.Namespace = parent.Namespace
	return k
}

// Stats returns the store's running totals.
func (s *CounterStore) Stats() *Stats { return &s.stats }

// Conflicts returns Stats().Conflicts (metrics.DocumentStore).
func (s *CounterStore) Conflicts() int64 { return s.stats.Conflicts.Load() }

// OnShardCommit sets f to be called with each shard entity a committed
// batch wrote (metrics.DocumentStore): the per-entity commit counter.
func (s *CounterStore) OnShardCommit(f func(counter string, shard int)) { s.stats.onCommit.Store(&f) }

// ShardWriteInterval is the pace the engine keeps per shard entity
// (shardcounter.ShardPacer): 0 when pacing is off.
func (s *CounterStore) ShardWriteInterval() time.Duration { return s.interval }

// SetDedupeWindow sets how long a request id is remembered; d <= 0
// restores shardcounter.DefaultDedupeWindow.
func (s *CounterStore) SetDedupeWindow(d time.Duration) {
	if d <= 0 {
		d = shardcounter.DefaultDedupeWindow
	}
	s.window.Store(int64(d))
}

// Close closes the client.
func (s *CounterStore) Close() error { return s.client.Close() }

// Ping reads an entity that need not exist: the database answers.
func (s *CounterStore) Ping(ctx context.Context) error {
	var e counterEntity
	err := s.client.Get(ctx, s.counterKey("sc_ping"), &e)
	if err != nil && !errors.Is(err, datastore.ErrNoSuchEntity) {
		return readError("ping", err)
	}
	return nil
}

// node names where a counter's shard entity lives, for Placement.
func (s *CounterStore) node(id string, i int) string {
	ns := ""
	if s.namespace != "" {
		ns = s.namespace + "/"
	}
	return fmt.Sprintf("datastore://%s/%s%s/%s_%d", s.project, ns, s.kind, id, i+1)
}

// readError maps a failed read or an administrative failure: nothing was
// applied.
func readError(op string, err error) error {
	var e *shardcounter.Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "datastore: %s: %v", op, err)
	}
	switch status.Code(err) {
	case codes.InvalidArgument:
		return shardcounter.Errorf(shardcounter.EINVALID, "datastore: %s: %v", op, status.Convert(err).Message())
	case codes.Internal, codes.Unknown, codes.DataLoss:
		return fmt.Errorf("datastore: %s: %w", op, err)
	}
	return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "datastore: %s: %v", op, err)
}

// EmulatorHost returns DATASTORE_EMULATOR_HOST, for the log line of serve.
func EmulatorHost() string { return os.Getenv("DATASTORE_EMULATOR_HOST") }

// stripes are in-process locks on counters: a transaction holds those of
// the counters it writes from its first read to its commit, so that
// transactions of one process on one counter queue instead of deadlocking
// on each other's read locks (the emulator, like Datastore's pessimistic
// concurrency, takes a shared lock on what a transaction reads and waits
// for it at commit). Correctness does not rest on them: the transactions
// keep writes serializable, across processes too.
type stripes [512]sync.Mutex

func stripeOf(counter string) int {
	h := fnv.New32a()
	h.Write([]byte(counter))
	return int(h.Sum32() % uint32(len(stripes{})))
}

// lock locks the stripes of the counters, in order, and returns their
// unlock.
func (st *stripes) lock(counters ...string) func() {
	keys := make([]int, 0, len(counters))
	for _, c := range counters {
		keys = append(keys, stripeOf(c))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	for _, k := range keys {
		st[k].Lock()
	}
	return func() {
		for _, k := range keys {
			st[k].Unlock()
		}
	}
}
