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
	"os"
	"strings"
	"time"

	"cloud.google.com/go/datastore"
	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
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
	now       func() time.Time
	// commitLimit is the most a commit's estimate may take
	// (docstore.CommitLimit; tests lower it): a batch past it is split.
	commitLimit int
	// afterDeleteCommit, when set (by tests), runs between
	// DeleteCounter's commit and its sweep; its error ends the delete.
	afterDeleteCommit func(id string) error
	base
	reads
	// Rankings are the store's shardcounter.RankingStore, on its records
	// (records.go).
	docstore.Rankings

	// shards remembers each counter's shard count and whether its writes
	// read every shard, so that a transaction reads what it needs in one
	// lookup; the transaction checks the guess against the counter entity.
	shards *lru.Cache[string, *counterEntity]
	// lockedReads: strong reads are read-write transactions, rolled back
	// (on the emulator, whose read-only ones are no snapshot: read.go).
	lockedReads bool
	// stamp is this store's pace stamp on the shard entities it commits
	// (pace.go).
	stamp string
}

// base is the state and the methods the store shares with firestore's:
// Stats, Conflicts, OnShardCommit, ShardWriteInterval, TxnUnits,
// SetDedupeWindow.
type base = docstore.Base

// reads are the readings built on the store's snapshot reads (read.go):
// ReadCounter(s), ReadShards, ReadSketches, Placement, ReadWindow,
// ReadSeries.
type reads = docstore.Reads

var (
	_ shardcounter.CounterStore     = (*CounterStore)(nil)
	_ shardcounter.RequestIDExpirer = (*CounterStore)(nil)
	_ shardcounter.ShardPacer       = (*CounterStore)(nil)
)

// Stats are the store's running totals, exported in /metrics.
type Stats = docstore.Stats

// Config is a parsed datastore:// DSN.
type Config struct {
	Project string
	Options
}

// ParseDSN reads datastore://PROJECT[?kind=K&namespace=NS&shard_write_interval=D].
func ParseDSN(dsn string) (Config, error) {
	d, err := docstore.ParseDSN(dsn, "datastore", "datastore://PROJECT[?kind=IK_CounterShardEntity&namespace=NS&shard_write_interval=1s]", func(d *docstore.DSN) error {
		if d.Path != "" {
			return d.Bad("a datastore DSN has no path (%q): give the namespace as ?namespace=", d.Path)
		}
		return nil
	})
	if err != nil {
		return Config{}, err
	}
	c := Config{Project: d.Project, Options: Options{ShardWriteInterval: d.Interval}}
	for k, v := range d.Options {
		switch k {
		case "kind":
			if !docstore.ValidName(v, 100) || strings.HasPrefix(v, "__") || strings.HasPrefix(v, "SC_") {
				return Config{}, d.Bad("kind %q is not a kind name (letters, digits, _ and -; not __…__ nor SC_…, which are taken)", v)
			}
			c.Kind = v
		case "namespace":
			if v != "" && (!docstore.ValidName(v, 100) || strings.HasPrefix(v, "__")) {
				return Config{}, d.Bad("namespace %q is not a namespace (letters, digits, _ and -)", v)
			}
			c.Namespace = v
		default:
			return Config{}, d.Bad("option %q is unknown (kind, namespace, shard_write_interval)", k)
		}
	}
	return c, nil
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
	return newStore(ctx, project, opts)
}

// newStore is New with client options added (tests watch the calls).
func newStore(ctx context.Context, project string, opts Options, extra ...option.ClientOption) (*CounterStore, error) {
	client, err := datastore.NewClient(ctx, project, append([]option.ClientOption{option.WithGRPCDialOption(grpc.WithDefaultServiceConfig(serviceConfig))}, extra...)...)
	if err != nil {
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "datastore: connect to project %s: %v (set DATASTORE_EMULATOR_HOST for the emulator, or Application Default Credentials for Google Cloud)", project, err)
	}
	s := &CounterStore{client: client, project: project, kind: opts.Kind, namespace: opts.Namespace, now: opts.Now, commitLimit: docstore.CommitLimit,
		lockedReads: EmulatorHost() != "", stamp: docstore.NewStamp()}
	if s.kind == "" {
		s.kind = DefaultKind
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.Init(opts.ShardWriteInterval, DefaultShardWriteInterval, opts.DedupeWindow)
	s.Rankings = docstore.NewRankings(records{s}, rankingsTable)
	s.reads = reads{Store: "datastore", Now: s.now, Snap: s.read, Meta: s.GetCounter, Buckets: s.buckets, Node: s.node,
		CounterPage: s.counterPage, MemberPage: s.memberPage, Member: s.member}
	s.shards, _ = lru.New[string, *counterEntity](docstore.CacheSize)
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

// counterKey is the key of counter id's entity.
func (s *CounterStore) counterKey(id string) *datastore.Key { return s.keyOf(Escape(id)) }

// keyOf is the key of the counter entity of key name name.
func (s *CounterStore) keyOf(name string) *datastore.Key {
	k := datastore.NameKey(counterKind, name, nil)
	k.Namespace = s.namespace
	return k
}

func childKey(parent *datastore.Key, kind, name string) *datastore.Key {
	k := datastore.NameKey(kind, name, parent)
	k.Namespace = parent.Namespace
	return k
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
func readError(op string, err error) error { return docstore.ReadError("datastore", op, err) }

// EmulatorHost returns DATASTORE_EMULATOR_HOST, for the log line of serve.
func EmulatorHost() string { return os.Getenv("DATASTORE_EMULATOR_HOST") }
