package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/storetest"
)

// TestBadArguments checks that the service refuses what it cannot use
// with a clear error, before it reaches the store.
func TestBadArguments(t *testing.T) {
	store := MustOpenStore(t)
	storetest.MustCreate(t, store, "plain", 2)
	e := MustNew(t, store, engine.Config{})
	ctx := context.Background()
	tooMany := make([]string, shardcounter.MaxReadBatch+1)
	for i := range tooMany {
		tooMany[i] = "plain"
	}
	for _, tc := range []struct {
		name, code, says string
		call             func() error
	}{
		{"ReadCountersNone", shardcounter.EINVALID, "give 1 to 1000", func() error { _, err := e.ReadCounters(ctx, nil, ""); return err }},
		{"ReadCountersTooMany", shardcounter.ETOOLARGE, "limit is 1000", func() error { _, err := e.ReadCounters(ctx, tooMany, ""); return err }},
		{"ReadCountersBadID", shardcounter.EINVALID, "counter 1:", func() error { _, err := e.ReadCounters(ctx, []string{"plain", ""}, ""); return err }},
		{"ReadCountersConsistency", shardcounter.EINVALID, "use strong or cached", func() error { _, err := e.ReadCounters(ctx, []string{"plain"}, "eventual"); return err }},
		{"ReadWindowNotWindowed", shardcounter.EINVALID, "has no window", func() error { _, err := e.ReadWindow(ctx, "plain", time.Hour); return err }},
		{"ReadWindowLast", shardcounter.EINVALID, "not positive", func() error { _, err := e.ReadWindow(ctx, "plain", 0); return err }},
		{"ReadWindowMissing", shardcounter.ENOTFOUND, "", func() error { _, err := e.ReadWindow(ctx, "nope", time.Hour); return err }},
		{"ReadSeriesNotWindowed", shardcounter.EINVALID, "has no window", func() error { _, err := e.ReadSeries(ctx, "plain", time.Hour, 0); return err }},
		{"ReadSeriesBucket", shardcounter.EINVALID, "negative", func() error { _, err := e.ReadSeries(ctx, "plain", time.Hour, -time.Hour); return err }},
		{"ListMembersPrefix", shardcounter.EINVALID, "prefix", func() error {
			_, err := e.ListMembers(ctx, "plain", shardcounter.ListOptions{Prefix: "a"})
			return err
		}},
		{"ListMembersLimit", shardcounter.EINVALID, "limit", func() error {
			_, err := e.ListMembers(ctx, "plain", shardcounter.ListOptions{Limit: shardcounter.MaxListLimit + 1})
			return err
		}},
		{"IsMemberEmpty", shardcounter.EINVALID, "member", func() error { _, err := e.IsMember(ctx, "plain", ""); return err }},
		{"PlacementBadID", shardcounter.EINVALID, "", func() error { _, err := e.Placement(ctx, ""); return err }},
		{"GetCounterMissing", shardcounter.ENOTFOUND, "", func() error { _, err := e.GetCounter(ctx, "nope"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if shardcounter.ErrorCode(err) != tc.code || !strings.Contains(shardcounter.ErrorMessage(err), tc.says) {
				t.Fatalf("error %v, want code %s saying %q", err, tc.code, tc.says)
			}
		})
	}
}
