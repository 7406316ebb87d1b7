package http_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/sketch"
)

// TestApproxCounters creates an approx counter over HTTP, adds members
// through the member route and the batch route (with kind approx, which
// also creates one), and reads the estimate.
func TestApproxCounters(t *testing.T) {
	ctx := context.Background()
	e := MustServe(t, EnvOptions{})
	c := e.Client
	created, _, err := c.CreateCounter(ctx, "uv", shardcounter.CreateOptions{Shards: 4, Kind: shardcounter.KindApprox})
	if err != nil || created.Kind != shardcounter.KindApprox {
		t.Fatalf("create kind approx: %+v, %v", created, err)
	}
	res, err := c.WriteCounter(ctx, shardcounter.AddMember("uv", "alice")) // PUT .../members/alice
	if err != nil || !res.Applied || res.Changed == nil || !*res.Changed {
		t.Fatalf("add alice: %+v, %v", res, err)
	}
	res, err = c.WriteCounter(ctx, shardcounter.AddMember("uv", "alice"))
	if err != nil || res.Changed == nil || *res.Changed {
		t.Fatalf("add alice again: %+v, %v; want unchanged", res, err)
	}
	var ws []shardcounter.Write
	for i := range 2000 {
		w := shardcounter.AddMember("uv:made", fmt.Sprintf("v%d", i%1000))
		w.Kind = shardcounter.KindApprox
		ws = append(ws, w)
	}
	results, err := c.WriteBatch(ctx, ws) // POST /v1/writes, "kind": "approx"
	if err != nil || results[0].Error != nil {
		t.Fatalf("batch of approx adds: %v, %+v", err, results[0])
	}
	if got, err := c.GetCounter(ctx, "uv:made"); err != nil || got.Kind != shardcounter.KindApprox {
		t.Fatalf("the counter a write with kind approx made: %+v, %v", got, err)
	}
	if v := e.MustValue(t, "uv:made"); math.Abs(float64(v-1000)) > 3*sketch.StdError*1000+2 {
		t.Fatalf("uv:made = %d, want about 1000", v)
	}
	if v := e.MustValue(t, "uv"); v != 1 {
		t.Fatalf("uv = %d, want 1", v)
	}
	// What an approx counter does not take.
	if _, err := c.WriteCounter(ctx, shardcounter.RemoveMember("uv", "alice")); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Fatalf("DELETE a member of an approx counter: %v, want invalid_argument", err)
	}
	if _, err := c.IsMember(ctx, "uv", "alice"); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Fatalf("GET a member of an approx counter: %v, want invalid_argument", err)
	}
	sadd := shardcounter.AddMember("uv", "bob")
	sadd.Kind = shardcounter.KindDistinct
	if _, err := c.WriteCounter(ctx, sadd); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Fatalf("a write meant for a distinct counter: %v, want invalid_argument", err)
	}
	if _, _, err := c.CreateCounter(ctx, "bad", shardcounter.CreateOptions{Kind: shardcounter.KindApprox, Max: new(int64(5))}); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
		t.Fatalf("approx with max: %v, want invalid_argument", err)
	}
}
