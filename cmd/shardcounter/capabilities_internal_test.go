package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/datastore"
	"github.com/shardcounter/shardcounter/dsn"
	"github.com/shardcounter/shardcounter/firestore"
	"github.com/shardcounter/shardcounter/internal/firestoretest"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/internal/redistest"
	"github.com/shardcounter/shardcounter/metrics"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/postgres"
	"github.com/shardcounter/shardcounter/redis"
)

// capability is something a store may do beyond the methods every store
// has, found with shardcounter.As as the engine, serve and transfer find
// it.
type capability struct {
	name string
	// in says that CounterStore holds it: every store has it, and a
	// wrapper passes it on by embedding the store.
	in   bool
	find func(shardcounter.CounterStore) (any, bool)
}

func capOf[T any](in bool) capability {
	var zero *T
	return capability{name: strings.TrimPrefix(fmt.Sprintf("%T", zero), "*"), in: in, find: func(s shardcounter.CounterStore) (any, bool) {
		return shardcounter.As[T](s)
	}}
}

// capabilities is every capability that is type-asserted anywhere: the
// interfaces, and each store's own type (collections, backups,
// snapshots, batch sizes, PostgreSQL's export snapshot).
var capabilities = []capability{
	capOf[shardcounter.RequestIDExpirer](true),
	capOf[shardcounter.SketchStore](true),
	capOf[shardcounter.RankingStore](true),
	capOf[shardcounter.ShardPacer](false),
	capOf[shardcounter.TxnApplier](false),
	capOf[shardcounter.CommitPipeliner](false),
	capOf[shardcounter.HotCommitPipeliner](false),
	capOf[shardcounter.MemoryReader](false),
	capOf[shardcounter.Loader](false),
	capOf[metrics.DocumentStore](false),
	capOf[*bolt.CounterStore](false),
	capOf[*pebble.CounterStore](false),
	capOf[*postgres.CounterStore](false),
	capOf[*redis.CounterStore](false),
	capOf[*firestore.CounterStore](false),
	capOf[*datastore.CounterStore](false),
}

// TestCapabilitiesThroughWrappers opens each of the seven kinds of store
// as serve opens it (openStore: dsn.Open) and starts the engine over it as
// serve does (startEngine: the metrics wrapper, then the engine's
// expiry), and checks that every capability the bare store has is found
// through the engine's store, as it is on the bare one: no wrapper hides
// one, and none claims one the store lacks (what it finds beneath the
// wrappers is the store itself). The chain of Unwrap calls must end at
// the store serve opened: a wrapper without Unwrap fails here, also on
// bolt, whose own type (its collections, its backups) lies beneath.
func TestCapabilitiesThroughWrappers(t *testing.T) {
	for _, st := range sevenStores(t) {
		t.Run(st.kind, func(t *testing.T) {
			ctx := context.Background()
			c := &serveCommand{store: st.dsn, storeGiven: true}
			sv := &serving{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if err := c.openStore(ctx, sv); err != nil {
				t.Fatal(err)
			}
			defer sv.store.Close()
			if err := sv.startEngine(); err != nil {
				t.Fatal(err)
			}
			defer sv.eng.Close(ctx)
			bare, chain := sv.store, sv.eng.Store()

			var layers []string
			s := chain
			for {
				layers = append(layers, fmt.Sprintf("%T", s))
				u, ok := s.(shardcounter.Unwrapper)
				if !ok {
					break
				}
				s = u.Unwrap()
			}
			switch {
			case s != bare:
				t.Errorf("the engine's store unwraps %s and stops at %T, not at the store serve opened (%T): a wrapper lacks Unwrap", strings.Join(layers, " → "), s, bare)
			case len(layers) < 3:
				t.Fatalf("the engine's store is %s: want the metrics and expiry wrappers over the store", strings.Join(layers, " → "))
			}

			for _, cp := range capabilities {
				b, has := cp.find(bare)
				got, found := cp.find(chain)
				switch {
				case has && !found:
					t.Errorf("%s: %T is one, and it is lost behind %s", cp.name, bare, strings.Join(layers, " → "))
				case !has && found:
					t.Errorf("%s: %T is not one, and %s claims it", cp.name, bare, strings.Join(layers, " → "))
				case has && !cp.in && got != b:
					t.Errorf("%s: found %T through the wrappers, not the store itself (%T): a wrapper forwards it", cp.name, got, b)
				}
			}
			_, berr := dsn.Collections(bare)
			_, cerr := dsn.Collections(chain)
			if berr == nil && cerr != nil {
				t.Errorf("the store's collections are lost behind the wrappers: %v", cerr)
			}
			if berr != nil {
				t.Errorf("%T has no collections: %v", bare, berr)
			}

			// What the engine reads off the capabilities is the store's
			// own answer through the wrappers.
			redisKind := st.kind == "redis" || st.kind == "redis+cluster"
			docKind := st.kind == "firestore" || st.kind == "datastore"
			if p, ok := shardcounter.As[shardcounter.TxnApplier](chain); ok != (redisKind || docKind) || ok && !p.TxnUnits() {
				t.Errorf("TxnApplier through the wrappers: %v", ok)
			}
			if p, ok := shardcounter.As[shardcounter.TxnScripter](chain); ok != redisKind || ok && !p.TxnScripted() {
				t.Errorf("TxnScripter through the wrappers: %v", ok)
			}
			if m, ok := shardcounter.As[shardcounter.MemoryReader](chain); ok != (st.kind == "pebble") || ok && !m.ReadsFromMemory() {
				t.Errorf("MemoryReader through the wrappers: %v", ok)
			}
			if _, ok := shardcounter.As[shardcounter.ShardPacer](chain); ok != (st.kind == "firestore" || st.kind == "datastore") {
				t.Errorf("ShardPacer through the wrappers: %v", ok)
			}
			if _, ok := shardcounter.As[metrics.DocumentStore](chain); ok != (st.kind == "firestore" || st.kind == "datastore") {
				t.Errorf("metrics.DocumentStore through the wrappers: %v", ok)
			}
			if _, ok := shardcounter.As[shardcounter.Loader](chain); ok != (st.kind == "postgres") {
				t.Errorf("Loader through the wrappers: %v", ok)
			}
		})
	}
}

// namedStore is a DSN and the kind of store it opens.
type namedStore struct{ kind, dsn string }

// sevenStores returns a DSN of each kind of store, on servers of this
// test's own: a bolt file, a Pebble directory, a PostgreSQL database, a
// Redis server, a Redis Cluster, and the Firestore emulator in native and
// in Datastore mode (started at once, each a JVM).
func sevenStores(t *testing.T) []namedStore {
	t.Helper()
	dir := t.TempDir()
	var wg sync.WaitGroup
	emulators := make([]*firestoretest.Emulator, 2)
	errs := make([]error, 2)
	for i, mode := range []firestoretest.Mode{firestoretest.Native, firestoretest.Datastore} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			emulators[i], errs[i] = firestoretest.Start(mode)
		}()
	}
	rd := redistest.MustStart(t)
	cl := redistest.MustStartCluster(t, 3)
	pg := pgtest.MustDatabase(t)
	wg.Wait()
	for i, err := range errs {
		if emulators[i] != nil {
			t.Cleanup(emulators[i].Stop)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("FIRESTORE_EMULATOR_HOST", emulators[0].Addr)
	t.Setenv("DATASTORE_EMULATOR_HOST", emulators[1].Addr)
	project := fmt.Sprintf("demo-caps-%d", os.Getpid())
	a := cl.Addrs()
	return []namedStore{
		{"bolt", "bolt:" + filepath.Join(dir, "c.db")},
		{"pebble", "pebble:" + filepath.Join(dir, "pebble")},
		{"postgres", pg},
		{"redis", "redis://" + rd.Addr},
		{"redis+cluster", "redis+cluster://" + a[0] + "?addr=" + strings.Join(a[1:], "&addr=")},
		{"firestore", "firestore://" + project},
		{"datastore", "datastore://" + project},
	}
}
