package pebble_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestSyncFailure makes the WAL's sync fail, as a failing disk would: the
// write of that commit is outcome unknown (it may be in the log or not),
// the store refuses every write after it as unavailable, nothing applied,
// and reads go on returning what was durable. Reopened, the store has
// every write acknowledged before the failure.
func TestSyncFailure(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pebble")
	fail := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo) {
			return errorfs.ErrInjected
		}
		return nil
	})}
	s, err := pebble.Open(ctx, dir, pebble.Options{FS: errorfs.Wrap(vfs.Default, fail)})
	if err != nil {
		t.Fatal(err)
	}
	storetest.MustCreate(t, s, "c", 2)
	if err := s.Add(ctx, "c", 5, 0); err != nil {
		t.Fatal(err)
	}

	fail.On()
	err = s.Add(ctx, "c", 7, 1)
	if code := shardcounter.ErrorCode(err); code != shardcounter.EOUTCOMEUNKNOWN || !shardcounter.IsOutcomeUnknown(err) {
		t.Fatalf("Add whose sync failed = %v (code %q), want outcome unknown", err, code)
	}
	fail.Off()
	if got := storetest.MustRead(t, s, "c"); got != 5 {
		t.Fatalf("value after the failed sync = %d, want 5: the unsynced write must not show", got)
	}
	if err := s.Add(ctx, "c", 1, 0); shardcounter.ErrorCode(err) != shardcounter.EUNAVAILABLE {
		t.Fatalf("Add after a failed sync = %v, want unavailable", err)
	}
	if _, err := s.CreateCounter(ctx, "d", shardcounter.Spec{Shards: 1}); shardcounter.ErrorCode(err) != shardcounter.EUNAVAILABLE {
		t.Fatalf("CreateCounter after a failed sync = %v, want unavailable", err)
	}
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping after a failed sync succeeded")
	}
	s.Close() // may report the failure again

	s, err = pebble.Open(ctx, dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := storetest.MustRead(t, s, "c"); got != 5 && got != 12 {
		t.Fatalf("value after reopening = %d, want 5 (or 12, if the failed write reached the log)", got)
	}
	if err := s.Add(ctx, "c", 1, 0); err != nil {
		t.Fatalf("Add after reopening: %v", err)
	}
}
