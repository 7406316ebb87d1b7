package transfer_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/transfer"
)

// TestAdminExportSnapshot checks that an export through the admin
// endpoint is one snapshot on bolt, Pebble (an online copy) and
// PostgreSQL (a REPEATABLE READ transaction): counters a and z, on
// different pages of the export, are always written together in one
// atomic batch, and the export must show them equal while the writes go
// on.
func TestAdminExportSnapshot(t *testing.T) {
	ctx := context.Background()
	for name, open := range map[string]func(t *testing.T) (shardcounter.CounterStore, error){
		"bolt": func(t *testing.T) (shardcounter.CounterStore, error) {
			return bolt.Open(ctx, filepath.Join(t.TempDir(), "s.db"), bolt.Options{})
		},
		"pebble": func(t *testing.T) (shardcounter.CounterStore, error) {
			return pebble.Open(ctx, filepath.Join(t.TempDir(), "p"), pebble.Options{})
		},
		"postgres": func(t *testing.T) (shardcounter.CounterStore, error) {
			return transfer.OpenStore(ctx, pgtest.MustDatabase(t), &transfer.Clock{})
		},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := open(t)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var incs []shardcounter.Increment
			for i := range 1500 {
				incs = append(incs, shardcounter.Increment{Counter: fmt.Sprintf("m%04d", i), Delta: 1, Create: &shardcounter.Spec{Shards: 1}})
			}
			incs = append(incs, shardcounter.Increment{Counter: "a", Delta: 1, Create: &shardcounter.Spec{Shards: 2}}, shardcounter.Increment{Counter: "z", Delta: 1, Create: &shardcounter.Spec{Shards: 2}})
			if _, err := s.Apply(ctx, incs); err != nil {
				t.Fatal(err)
			}
			srv := MustServeAdmin(t, s, nil)
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					outs, err := s.Apply(ctx, []shardcounter.Increment{{Counter: "a", Delta: 1, Pick: 1}, {Counter: "z", Delta: 1}})
					if err != nil || outs[0].Err != nil || outs[1].Err != nil {
						t.Error(err, outs)
						return
					}
				}
			}()
			defer wg.Wait()
			defer stop.Store(true)
			for range 3 {
				resp, err := http.Get(srv.URL + transfer.ExportPath)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var a, z string
				for _, l := range strings.Split(string(b), "\n") {
					if strings.Contains(l, `"id":"a"`) {
						a = l[strings.Index(l, `"value"`):]
					}
					if strings.Contains(l, `"id":"z"`) {
						z = l[strings.Index(l, `"value"`):]
					}
				}
				if a == "" || a != z {
					t.Fatalf("a %s, z %s: not one snapshot", a, z)
				}
			}
		})
	}
}

// MustServeAdmin serves the admin endpoints over store as serve does: on
// the HTTP API's server, over eng, or when it is nil an engine of its own
// on store; stopped at the end of the test.
func MustServeAdmin(tb testing.TB, store shardcounter.CounterStore, eng *engine.Engine) *httptest.Server {
	tb.Helper()
	if eng == nil {
		var err error
		if eng, err = engine.New(store, engine.Config{}); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { eng.Close(context.Background()) })
	}
	log := slog.New(slog.DiscardHandler)
	srv := httptest.NewServer(shttp.NewServer(eng, shttp.ServerOptions{Logger: log, Admin: transfer.Admin(store, log)}))
	tb.Cleanup(srv.Close)
	return srv
}
