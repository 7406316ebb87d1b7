package firestore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"
	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
	"strconv"
)

// Names of the collections and fields this store writes beside the
// seed's layout (docs/FIRESTORE.md lists them).
const (
	countersCollection = "counters"
	shardsCollection   = "shards"
	membersCollection  = "sc_members"
	bucketsCollection  = "sc_buckets"
	requestsCollection = "sc_requests"

	fieldNumShards = "num_shards"   // counter and shard documents
	fieldMeta      = "shardcounter" // counter document: the spec the seed has no place for
	fieldAt        = "at"           // request documents: when recorded
	fieldStart     = "start"        // bucket documents: the bucket's start
	fieldOf        = "of"           // request and member documents: the counter's created_at
)

// DefaultCountField is the field of a shard document that holds its
// value, as seed 000's data model and most of its samples name it.
const DefaultCountField = "count"

// DefaultShardWriteInterval is the pace of commits per shard document the
// engine keeps on this store unless told otherwise: seed 000's one write a
// second per document.
const DefaultShardWriteInterval = time.Second

// Options configure a CounterStore. The zero value uses the defaults.
type Options struct {
	// CountField is the shard documents' value field. Default "count";
	// "Count" serves apps built on seed 000's Go and C# samples.
	CountField string
	// ShardWriteInterval is how often the engine may commit to one shard
	// document (ShardWriteInterval()); 0 leaves the default, a negative
	// value turns pacing off. Default DefaultShardWriteInterval.
	ShardWriteInterval time.Duration
	// Now is the store's clock: created_at, the age of request ids and
	// the window bucket of a write follow it. Default time.Now.
	Now func() time.Time
	// DedupeWindow is how long a request id is remembered. Default
	// shardcounter.DefaultDedupeWindow; SetDedupeWindow changes it.
	DedupeWindow time.Duration
}

// CounterStore is a shardcounter.CounterStore on Cloud Firestore in
// native mode, in seed 000's layout (see the package doc). It is safe for
// concurrent use, also by several processes on one database.
type CounterStore struct {
	client *firestore.Client
	// raw is the low-level client of the strong reads (snapshot.go), on
	// the database dbPath names (projects/P/databases/D).
	raw      *vkit.Client
	rawConn  *grpc.ClientConn // the emulator connection newRawClient dialed, or nil
	dbPath   string
	writer   string // this store's stamp on the shard documents it commits (see pace)
	project  string
	database string
	field    string
	now      func() time.Time
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

	cache *lru.Cache[string, *counterState]
	// shardsSeen holds the shard counts strong reads found, the guess of
	// the next read of a counter not in cache: right, it is read in one
	// batch get; wrong, in two.
	shardsSeen *lru.Cache[string, int]
	// fullHint holds counters found near the int64 limits, whose writes
	// check their total until they are created again.
	fullHint sync.Map
	// lockedReads: strong reads are read-write transactions, rolled
	// back (on the emulator, whose read-only ones are no snapshot:
	// getSnapshotOnce).
	lockedReads bool
}

// base is the state and the methods the store shares with datastore's:
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
)

// Stats are the store's running totals, exported in /metrics.
type Stats = docstore.Stats

// Config is a parsed firestore:// DSN.
type Config struct {
	Project, Database string
	Options
}

// ParseDSN reads firestore://PROJECT[/DATABASE][?count_field=F&shard_write_interval=D].
func ParseDSN(dsn string) (Config, error) {
	d, err := docstore.ParseDSN(dsn, "firestore", "firestore://PROJECT[/DATABASE][?count_field=count&shard_write_interval=1s]", nil)
	if err != nil {
		return Config{}, err
	}
	c := Config{Project: d.Project, Database: "(default)", Options: Options{ShardWriteInterval: d.Interval}}
	if db := d.Path; db != "" {
		if strings.Contains(db, "/") || !(db == "(default)" || docstore.ValidName(db, 63)) {
			return Config{}, d.Bad("database %q is not a database id", db)
		}
		c.Database = db
	}
	for k, v := range d.Options {
		switch k {
		case "count_field":
			if v == "" || strings.ContainsAny(v, ".`*[]~/") {
				return Config{}, d.Bad("count_field %q is not a plain field name", v)
			}
			c.CountField = v
		default:
			return Config{}, d.Bad("option %q is unknown (count_field, shard_write_interval)", k)
		}
	}
	return c, nil
}

// Open opens the store a firestore:// DSN names. With
// FIRESTORE_EMULATOR_HOST set, Google's client talks to that emulator;
// otherwise to the project's database with Application Default
// Credentials. It pings the database before it returns.
func Open(ctx context.Context, dsn string) (*CounterStore, error) {
	c, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return New(ctx, c.Project, c.Database, c.Options)
}

// New opens the store on project's database (("default") when empty).
func New(ctx context.Context, project, database string, opts Options) (*CounterStore, error) {
	return newStore(ctx, project, database, opts)
}

// newStore is New with client options added (tests watch its calls).
func newStore(ctx context.Context, project, database string, opts Options, extra ...option.ClientOption) (*CounterStore, error) {
	if database == "" {
		database = firestore.DefaultDatabaseID
	}
	client, err := firestore.NewClientWithDatabase(ctx, project, database, extra...)
	if err != nil {
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "firestore: connect to project %s: %v (set FIRESTORE_EMULATOR_HOST for the emulator, or Application Default Credentials for Google Cloud)", project, err)
	}
	raw, rawConn, err := newRawClient(ctx, extra)
	if err != nil {
		client.Close()
		return nil, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "firestore: connect to project %s: %v", project, err)
	}
	dbPath, _, _ := strings.Cut(client.Collection(countersCollection).Doc("x").Path, "/documents/")
	s := &CounterStore{client: client, raw: raw, rawConn: rawConn, dbPath: dbPath, project: project, database: database, field: opts.CountField, now: opts.Now, writer: docstore.NewStamp(), commitLimit: docstore.CommitLimit,
		lockedReads: os.Getenv("FIRESTORE_EMULATOR_HOST") != ""}
	if s.field == "" {
		s.field = DefaultCountField
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.Init(opts.ShardWriteInterval, DefaultShardWriteInterval, opts.DedupeWindow)
	s.Rankings = docstore.NewRankings(records{s}, rankingsTable)
	s.reads = reads{Store: "firestore", Now: s.now, Snap: s.snap, Meta: s.GetCounter, Buckets: s.buckets,
		Node:        func(id string, i int) string { return s.node(id) + "/shards/" + strconv.Itoa(i) },
		CounterPage: s.counterPage, MemberPage: s.memberPage, Member: s.member}
	s.cache, _ = lru.New[string, *counterState](docstore.CacheSize)
	s.shardsSeen, _ = lru.New[string, int](docstore.CacheSize)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.Ping(pctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Client returns the Firestore client, for tests and for apps that write
// the seed's way beside the store.
func (s *CounterStore) Client() *firestore.Client { return s.client }

// Close closes the clients.
func (s *CounterStore) Close() error {
	// raw's connection may be the other's (tests give one to both), and
	// closing it twice fails: the client's error is the one to report.
	s.raw.Close()
	if s.rawConn != nil {
		s.rawConn.Close()
	}
	return s.client.Close()
}

// Ping reads a document that need not exist: the database answers.
func (s *CounterStore) Ping(ctx context.Context) error {
	_, err := s.client.Collection(countersCollection).Doc("sc_ping").Get(ctx)
	if err != nil && status.Code(err) != codes.NotFound {
		return readError("ping", err)
	}
	return nil
}

func (s *CounterStore) counterRef(id string) *firestore.DocumentRef {
	return s.client.Collection(countersCollection).Doc(Escape(id))
}

// bucketRef is the document of the bucket of a windowed counter that
// starts at start.
func bucketRef(counter *firestore.DocumentRef, start time.Time) *firestore.DocumentRef {
	return counter.Collection(bucketsCollection).Doc(strconv.FormatInt(start.Unix(), 10))
}

func shardRef(counter *firestore.DocumentRef, i int) *firestore.DocumentRef {
	return counter.Collection(shardsCollection).Doc(fmt.Sprint(i))
}

// node names where a counter's documents live, for Placement.
func (s *CounterStore) node(id string) string {
	return fmt.Sprintf("firestore://%s/%s/%s/%s", s.project, s.database, countersCollection, Escape(id))
}

// readError maps a failed read: nothing was applied.
func readError(op string, err error) error { return docstore.ReadError("firestore", op, err) }

// EmulatorHost returns FIRESTORE_EMULATOR_HOST, for the log line of serve.
func EmulatorHost() string { return os.Getenv("FIRESTORE_EMULATOR_HOST") }

// Escape returns the document id that holds id (docstore.Escape: it keeps
// byte order, so a scan in document-id order is one in id order).
func Escape(id string) string { return docstore.Escape(id) }

// Unescape reverses Escape, or is EINVALID for a document id Escape does
// not make.
func Unescape(docID string) (string, error) { return docstore.Unescape(docID) }
