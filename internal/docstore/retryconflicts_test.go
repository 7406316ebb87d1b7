package docstore

import (
	"context"
	"errors"
	"testing"
)

// TestRetryConflicts checks that a conflict is tried again, at most 41
// times in all, that any other error or success ends it at once, and
// that an ended ctx gives up.
func TestRetryConflicts(t *testing.T) {
	conflictErr, otherErr := errors.New("conflict"), errors.New("other")
	isConflict := func(err error) bool { return errors.Is(err, conflictErr) }
	for _, c := range []struct {
		name    string
		errs    []error // try's answers in turn; the last repeats
		tries   int
		gaveUp  bool
		wantErr error
	}{
		{"success", []error{nil}, 1, false, nil},
		{"conflicts, then success", []error{conflictErr, conflictErr, nil}, 3, false, nil},
		{"conflict, then another error", []error{conflictErr, otherErr}, 2, false, otherErr},
		{"always conflicts", []error{conflictErr}, 41, true, conflictErr},
	} {
		n := 0
		gaveUp, err := RetryConflicts(context.Background(), isConflict, func() error {
			n++
			return c.errs[min(n, len(c.errs))-1]
		})
		if n != c.tries || gaveUp != c.gaveUp || !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
			t.Errorf("%s: %d tries, gave up %v, %v; want %d, %v, %v", c.name, n, gaveUp, err, c.tries, c.gaveUp, c.wantErr)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := 0
	if gaveUp, err := RetryConflicts(ctx, isConflict, func() error { n++; return conflictErr }); !gaveUp || n != 1 || !errors.Is(err, conflictErr) {
		t.Errorf("ended ctx: %d tries, gave up %v, %v; want 1, true, the conflict", n, gaveUp, err)
	}
}
