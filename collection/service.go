package collection

import (
	"context"
	"crypto/rand"
	"hash/fnv"
	"maps"
	mrand "math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docindex"
)

// Defaults of Config.
const (
	// DefaultChunkSize is Firestore's limit on the values of one `in`
	// filter, which the seed's shardChunks respects.
	DefaultChunkSize = 30
	// DefaultParallel bounds the first reads of a query that run at once.
	DefaultParallel = 16
)

// Config configures a Service. The zero value is usable: each field's doc
// gives its default.
type Config struct {
	// ChunkSize bounds the shards one store read covers, further bounded
	// by the store's MaxScanShards. Default 30.
	ChunkSize int
	// Parallel bounds how many of a query's first per-chunk reads run at
	// once. Default 16.
	Parallel int
	// Now returns the current time: the timestamp of a document that has
	// none, and a collection's creation time. Default time.Now.
	Now func() time.Time
	// Shard returns a random shard in [0, n) for the "random" shard key.
	// Default math/rand/v2's IntN.
	Shard func(n int) int
	// NewID returns an id for a document written without one. Default 20
	// random letters and digits, as Firestore's auto ids.
	NewID func() string
}

func (c *Config) setDefaults() {
	if c.ChunkSize <= 0 {
		c.ChunkSize = DefaultChunkSize
	}
	if c.Parallel <= 0 {
		c.Parallel = DefaultParallel
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Shard == nil {
		c.Shard = mrand.IntN
	}
	if c.NewID == nil {
		c.NewID = NewID
	}
}

// Stats are the service's running totals, each an atomic counter, ready
// to export as metrics. DocumentsRead against DocumentsReturned shows what
// the merge costs over an unsharded read.
type Stats struct {
	Queries           atomic.Int64 // QueryDocuments calls that succeeded
	Scans             atomic.Int64 // store ScanDocuments calls
	DocumentsRead     atomic.Int64 // documents the store returned to scans
	DocumentsReturned atomic.Int64 // documents returned to queries
	DocumentsWritten  atomic.Int64 // documents written by PutDocuments
}

// Service is a shardcounter.CollectionService over a store. It is safe for
// concurrent use and keeps no state of its own beyond Stats.
type Service struct {
	store shardcounter.CollectionStore
	cfg   Config
	stats Stats
}

var _ shardcounter.CollectionService = (*Service)(nil)

// New returns a service over store.
func New(store shardcounter.CollectionStore, cfg Config) *Service {
	cfg.setDefaults()
	return &Service{store: store, cfg: cfg}
}

// Stats returns the service's running totals.
func (s *Service) Stats() *Stats { return &s.stats }

const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// NewID returns 20 random letters and digits (119 bits), from crypto/rand
// so that ids made by several processes do not collide.
func NewID() string {
	var b [20]byte
	rand.Read(b[:])
	for i := range b {
		// 248 = 4·62: bytes below it map uniformly; redraw the rest.
		for b[i] >= 248 {
			var c [1]byte
			rand.Read(c[:])
			b[i] = c[0]
		}
		b[i] = idAlphabet[b[i]%62]
	}
	return string(b[:])
}

// HashShard returns the shard of a document under the "id_hash" shard key:
// fnv64a(id) mod n.
func HashShard(id string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(id))
	return int(h.Sum64() % uint64(n))
}

// CreateCollection makes an empty collection.
func (s *Service) CreateCollection(ctx context.Context, name string, opts shardcounter.CollectionOptions) (*shardcounter.Collection, error) {
	c := &shardcounter.Collection{
		Name:           name,
		Shards:         opts.Shards,
		TimestampField: opts.TimestampField,
		Indexes:        append([]string(nil), opts.Indexes...),
		ShardKey:       opts.ShardKey,
		CreatedAt:      shardcounter.TruncateTimestamp(s.cfg.Now()), // every store keeps microseconds
	}
	if err := shardcounter.ValidateCollection(c); err != nil {
		return nil, err
	}
	if err := s.store.CreateCollection(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// GetCollection returns a collection's metadata.
func (s *Service) GetCollection(ctx context.Context, name string) (*shardcounter.Collection, error) {
	if err := shardcounter.ValidateID("collection name", name); err != nil {
		return nil, err
	}
	return s.store.GetCollection(ctx, name)
}

// ReshardCollection raises the shard count; a lower count is EINVALID and
// the same count changes nothing.
func (s *Service) ReshardCollection(ctx context.Context, name string, shards int) (*shardcounter.Collection, error) {
	if err := shardcounter.ValidateShards(shards); err != nil {
		return nil, err
	}
	c, err := s.GetCollection(ctx, name)
	if err != nil {
		return nil, err
	}
	switch {
	case shards < c.Shards:
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "collection %q has %d shards: a shard count only grows, because documents stay on their shards", name, c.Shards)
	case shards == c.Shards:
		return c, nil
	}
	return s.store.GrowCollection(ctx, name, shards)
}

// DeleteCollection removes the collection and its documents.
func (s *Service) DeleteCollection(ctx context.Context, name string) error {
	if err := shardcounter.ValidateID("collection name", name); err != nil {
		return err
	}
	return s.store.DeleteCollection(ctx, name)
}

// PutDocuments prepares every document (id, timestamp, shard, index
// values) before writing any, so an invalid one fails the call with
// nothing written.
func (s *Service) PutDocuments(ctx context.Context, name string, in []shardcounter.DocumentInput) ([]shardcounter.DocumentRef, error) {
	switch {
	case len(in) == 0:
		return nil, shardcounter.Errorf(shardcounter.EINVALID, "no documents given: give one, or up to %d", shardcounter.MaxDocumentBatch)
	case len(in) > shardcounter.MaxDocumentBatch:
		return nil, shardcounter.Errorf(shardcounter.ETOOLARGE, "%d documents in one batch: the limit is %d, split it", len(in), shardcounter.MaxDocumentBatch)
	}
	c, err := s.GetCollection(ctx, name)
	if err != nil {
		return nil, err
	}
	now := shardcounter.TruncateTimestamp(s.cfg.Now())
	docs := make([]*shardcounter.Document, len(in))
	seen := make(map[string]int, len(in))
	for i, d := range in {
		doc, err := s.prepare(c, d, now)
		if err != nil {
			if len(in) > 1 {
				return nil, shardcounter.Errorf(shardcounter.ErrorCode(err), "document %d: %s", i, shardcounter.ErrorMessage(err))
			}
			return nil, err
		}
		if j, dup := seen[doc.ID]; dup {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "documents %d and %d have the same id %q: give each its own", j, i, doc.ID)
		}
		seen[doc.ID] = i
		docs[i] = doc
	}
	if err := s.store.PutDocuments(ctx, c, docs); err != nil {
		return nil, err
	}
	s.stats.DocumentsWritten.Add(int64(len(docs)))
	refs := make([]shardcounter.DocumentRef, len(docs))
	for i, d := range docs {
		refs[i] = shardcounter.DocumentRef{ID: d.ID, Shard: d.Shard, Timestamp: d.Timestamp}
	}
	return refs, nil
}

// prepare turns a client's document into a stored one.
func (s *Service) prepare(c *shardcounter.Collection, in shardcounter.DocumentInput, now time.Time) (*shardcounter.Document, error) {
	d := &shardcounter.Document{ID: in.ID, Data: in.Data}
	if d.ID == "" {
		d.ID = s.cfg.NewID()
	} else if err := shardcounter.ValidateID("document id", d.ID); err != nil {
		return nil, err
	}
	if d.Data == nil {
		d.Data = map[string]any{}
	}
	switch v, ok := shardcounter.Lookup(d.Data, c.TimestampField); {
	case !ok:
		d.Timestamp = now
		data, err := withField(d.Data, c.TimestampField, now.Format(time.RFC3339Nano))
		if err != nil {
			return nil, err
		}
		d.Data = data
	default:
		str, isStr := v.(string)
		if !isStr {
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "timestamp field %q holds %T: give an RFC 3339 string such as 2019-01-01T13:45:23.010Z, or leave it out for the server's time", c.TimestampField, v)
		}
		t, err := shardcounter.ParseTimestamp(str)
		if err != nil {
			return nil, err
		}
		d.Timestamp = t
	}
	if _, err := docindex.Entries(c, d.Data); err != nil {
		return nil, err
	}
	switch c.ShardKey {
	case shardcounter.ShardIDHash:
		d.Shard = HashShard(d.ID, c.Shards)
	default:
		d.Shard = s.cfg.Shard(c.Shards)
	}
	return d, nil
}

// withField returns data with v set at a dotted path, creating the objects
// on the way. The maps along the path are copied, so the caller's data is
// not changed.
func withField(data map[string]any, path string, v any) (map[string]any, error) {
	segs := strings.Split(path, ".")
	root := maps.Clone(data)
	m := root
	for i, seg := range segs[:len(segs)-1] {
		var next map[string]any
		switch x := m[seg].(type) {
		case nil:
			next = map[string]any{}
		case map[string]any:
			next = maps.Clone(x)
		default:
			return nil, shardcounter.Errorf(shardcounter.EINVALID, "timestamp field %q cannot be set: %q is not an object", path, strings.Join(segs[:i+1], "."))
		}
		m[seg] = next
		m = next
	}
	m[segs[len(segs)-1]] = v
	return root, nil
}

// GetDocument returns one document.
func (s *Service) GetDocument(ctx context.Context, name, id string) (*shardcounter.Document, error) {
	if err := shardcounter.ValidateID("document id", id); err != nil {
		return nil, err
	}
	c, err := s.GetCollection(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.store.GetDocument(ctx, c, id)
}

// DeleteDocument removes one document.
func (s *Service) DeleteDocument(ctx context.Context, name, id string) error {
	if err := shardcounter.ValidateID("document id", id); err != nil {
		return err
	}
	c, err := s.GetCollection(ctx, name)
	if err != nil {
		return err
	}
	return s.store.DeleteDocument(ctx, c, id)
}
