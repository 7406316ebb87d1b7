package rls_test

import (
	"context"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/shardcounter/shardcounter/engine"
	"github.com/shardcounter/shardcounter/pebble"
	"github.com/shardcounter/shardcounter/rls"
)

// clock is the store's clock, moved by the test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const edge = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: ldap
    rate_limit: {unlimited: true}
  - key: service
    descriptors:
      - key: user
        value: user-a
        shadow_mode: true
        rate_limit: {unit: minute, requests_per_unit: 1}
  - key: path
    value: /api/*
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: roll
    rate_limit: {unit: minute, requests_per_unit: 4}
    metadata:
      shardcounter: {window: sliding, bucket: 10s}
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        rate_limit: {name: specific, unit: minute, requests_per_unit: 1}
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 5, replaces: [{name: specific}]}
`

// serve starts the service over an engine on Pebble with the store's
// clock at clk, on a real listener, and returns go-control-plane's
// generated client, as Envoy's rate_limit filter calls it.
func serve(t *testing.T, clk *clock, yaml string) (pb.RateLimitServiceClient, *rls.Service) {
	t.Helper()
	ctx := context.Background()
	store, err := pebble.Open(ctx, t.TempDir(), pebble.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	eng, err := engine.New(store, engine.Config{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(context.Background()) })
	cfg, err := rls.Parse("edge.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	svc := rls.New(eng)
	if err := svc.SetConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	svc.Register(g)
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewRateLimitServiceClient(conn), svc
}

func desc(kvs ...string) *rlpb.RateLimitDescriptor {
	d := &rlpb.RateLimitDescriptor{}
	for i := 0; i < len(kvs); i += 2 {
		d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: kvs[i], Value: kvs[i+1]})
	}
	return d
}

func call(t *testing.T, c pb.RateLimitServiceClient, req *pb.RateLimitRequest) *pb.RateLimitResponse {
	t.Helper()
	if req.Domain == "" {
		req.Domain = "edge"
	}
	resp, err := c.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// one asks for one descriptor and returns the overall code and its status.
func one(t *testing.T, c pb.RateLimitServiceClient, d *rlpb.RateLimitDescriptor) (pb.RateLimitResponse_Code, *pb.RateLimitResponse_DescriptorStatus) {
	t.Helper()
	r := call(t, c, &pb.RateLimitRequest{Descriptors: []*rlpb.RateLimitDescriptor{d}})
	return r.OverallCode, r.Statuses[0]
}

// TestShouldRateLimit runs envoyproxy/ratelimit's behaviours through the
// generated client: a fixed window a minute per address with its
// remaining and reset, a value blocked by 0 a second, unlimited and
// unmatched descriptors, shadow mode that counts and answers OK,
// wildcards with and without a shared threshold, a sliding window that
// refuses where a fixed one would admit, replaces, hits_addend of the
// request and of a descriptor, and an overall OVER_LIMIT when any
// descriptor is over.
func TestShouldRateLimit(t *testing.T) {
	clk := &clock{now: time.Unix(1_800_000_000, 0)} // a minute's start
	c, _ := serve(t, clk, edge)
	ok, over := pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT

	for i, want := range []uint32{2, 1, 0} {
		code, st := one(t, c, desc("remote_address", "10.0.0.1"))
		if code != ok || st.Code != ok || st.LimitRemaining != want || st.DurationUntilReset.AsDuration() != time.Minute ||
			st.CurrentLimit.GetRequestsPerUnit() != 3 || st.CurrentLimit.GetUnit() != pb.RateLimitResponse_RateLimit_MINUTE {
			t.Fatalf("take %d = %v, %v; want OK with %d remaining, reset in 1m", i, code, st, want)
		}
	}
	clk.advance(15 * time.Second)
	if code, st := one(t, c, desc("remote_address", "10.0.0.1")); code != over || st.Code != over || st.LimitRemaining != 0 || st.DurationUntilReset.AsDuration() != 45*time.Second {
		t.Errorf("4th take = %v, %v; want OVER_LIMIT, reset in 45s", code, st)
	}
	if code, st := one(t, c, desc("remote_address", "10.0.0.2")); code != ok || st.LimitRemaining != 2 {
		t.Errorf("another address = %v, %v; want its own count", code, st)
	}
	if code, st := one(t, c, desc("remote_address", "50.0.0.5")); code != over || st.CurrentLimit.GetRequestsPerUnit() != 0 {
		t.Errorf("blocked address = %v, %v; want OVER_LIMIT", code, st)
	}
	if code, st := one(t, c, desc("ldap", "x")); code != ok || st.LimitRemaining != math.MaxUint32 || st.CurrentLimit != nil {
		t.Errorf("unlimited = %v, %v; want OK with MaxUint32 remaining", code, st)
	}
	if code, st := one(t, c, desc("nothing", "x")); code != ok || st.Code != ok || st.CurrentLimit != nil {
		t.Errorf("unmatched = %v, %v; want OK without a limit", code, st)
	}
	if r := call(t, c, &pb.RateLimitRequest{Domain: "elsewhere", Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", "10.0.0.1")}}); r.OverallCode != ok {
		t.Errorf("unknown domain = %v; want OK", r)
	}

	// Shadow mode: over, yet OK; the count is kept, as a check of 0 hits shows.
	for range 3 {
		if code, st := one(t, c, desc("service", "auth", "user", "user-a")); code != ok || st.Code != ok {
			t.Errorf("shadow mode = %v, %v; want OK", code, st)
		}
	}
	zero := desc("service", "auth", "user", "user-a")
	zero.HitsAddend = wrapperspb.UInt64(0)
	if _, st := one(t, c, zero); st.LimitRemaining != 0 {
		t.Errorf("shadow mode's count = %v; want its one request counted", st)
	}

	// Wildcards: each value its own count, or one shared.
	for _, p := range []string{"/api/a", "/api/a", "/api/b", "/api/b"} {
		if code, _ := one(t, c, desc("path", p)); code != ok {
			t.Errorf("path %s = %v; want OK (2 a minute each)", p, code)
		}
	}
	for i, f := range []string{"files/a", "files/b", "files/c"} {
		if code, _ := one(t, c, desc("files", f)); (code == ok) != (i < 2) {
			t.Errorf("file %s = %v; want 2 a minute shared", f, code)
		}
	}

	// hits_addend: the request's, then a descriptor's (0 checks only).
	if _, st := one(t, c, desc("remote_address", "10.0.0.3")); st.LimitRemaining != 2 {
		t.Fatalf("first take = %v", st)
	}
	if r := call(t, c, &pb.RateLimitRequest{HitsAddend: 2, Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", "10.0.0.3")}}); r.Statuses[0].LimitRemaining != 0 || r.OverallCode != ok {
		t.Errorf("take of 2 = %v", r)
	}
	d := desc("remote_address", "10.0.0.4")
	d.HitsAddend = wrapperspb.UInt64(4)
	if code, st := one(t, c, d); code != over || st.LimitRemaining != 0 {
		t.Errorf("take of 4 of 3 = %v, %v; want OVER_LIMIT", code, st)
	}
	d.HitsAddend = wrapperspb.UInt64(0)
	if code, st := one(t, c, d); code != ok || st.LimitRemaining != 3 {
		t.Errorf("check after a refused take = %v, %v; want 3 remaining: a refused take is not charged", code, st)
	}

	// Several descriptors: statuses in order, OVER_LIMIT if any is.
	r := call(t, c, &pb.RateLimitRequest{Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", "10.0.0.5"), desc("remote_address", "10.0.0.1")}})
	if r.OverallCode != over || r.Statuses[0].Code != ok || r.Statuses[0].LimitRemaining != 2 || r.Statuses[1].Code != over {
		t.Errorf("two descriptors = %v", r)
	}

	// replaces: with key_2's rule matched too, key_1's is not taken from.
	r = call(t, c, &pb.RateLimitRequest{Descriptors: []*rlpb.RateLimitDescriptor{desc("key_1", "value_1", "user", "u"), desc("key_2", "value_2", "user", "u")}})
	if r.OverallCode != ok || r.Statuses[0].CurrentLimit != nil || r.Statuses[1].LimitRemaining != 4 {
		t.Errorf("replaced = %v", r)
	}
	if code, st := one(t, c, desc("key_1", "value_1", "user", "u")); code != ok || st.LimitRemaining != 0 {
		t.Errorf("the replaced rule alone = %v, %v; want its 1 a minute untouched before", code, st)
	}

	// Sliding: 4 in the last minute, in 10s buckets.
	clk.advance(35 * time.Second) // 50s into the minute
	for range 4 {
		if code, _ := one(t, c, desc("roll", "k")); code != ok {
			t.Fatalf("sliding take = %v", code)
		}
	}
	clk.advance(10 * time.Second) // the next minute: a fixed window would admit
	if code, st := one(t, c, desc("roll", "k")); code != over {
		t.Errorf("sliding window after its minute's edge = %v, %v; want OVER_LIMIT", code, st)
	}
	if code, st := one(t, c, desc("remote_address", "10.0.0.1")); code != ok || st.LimitRemaining != 2 {
		t.Errorf("fixed window after the edge = %v, %v; want a fresh window", code, st)
	}
	clk.advance(50 * time.Second) // the bucket of the 4 takes has left
	if code, st := one(t, c, desc("roll", "k")); code != ok || st.LimitRemaining != 3 {
		t.Errorf("sliding window a minute after = %v, %v; want OK", code, st)
	}
}

// TestRequestErrors: what Envoy never sends is refused, and nothing taken.
func TestRequestErrors(t *testing.T) {
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	c, _ := serve(t, clk, edge)
	neg := desc("remote_address", "10.0.0.1")
	neg.IsNegativeHits = true
	for _, req := range []*pb.RateLimitRequest{
		{Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", "10.0.0.1")}},
		{Domain: "edge"},
		{Domain: "edge", Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", "10.0.0.1"), neg}},
	} {
		if _, err := c.ShouldRateLimit(context.Background(), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("ShouldRateLimit(%v) = %v; want InvalidArgument", req, err)
		}
	}
	if _, st := one(t, c, desc("remote_address", "10.0.0.1")); st.LimitRemaining != 2 {
		t.Errorf("after refused requests: %v; want nothing taken", st)
	}
}

// TestSetConfigAndOverride: a new configuration is in force at once (a
// rule whose limit changed starts afresh), and Envoy's per-descriptor
// limit override counts in its own limit.
func TestSetConfigAndOverride(t *testing.T) {
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	c, svc := serve(t, clk, edge)
	one(t, c, desc("remote_address", "10.0.0.1"))
	cfg, err := rls.Parse("edge.yaml", []byte("domain: edge\ndescriptors:\n- key: remote_address\n  rate_limit: {unit: minute, requests_per_unit: 10}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.SetConfig(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if _, st := one(t, c, desc("remote_address", "10.0.0.1")); st.LimitRemaining != 9 || st.CurrentLimit.GetRequestsPerUnit() != 10 {
		t.Errorf("after SetConfig: %v; want 10 a minute, afresh", st)
	}
	if _, st := one(t, c, desc("ldap", "x")); st.CurrentLimit != nil || st.LimitRemaining != 0 {
		t.Errorf("a rule gone with the old configuration: %v", st)
	}
	d := desc("remote_address", "10.0.0.1")
	d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
	if code, st := one(t, c, d); code != pb.RateLimitResponse_OK || st.LimitRemaining != 0 || st.DurationUntilReset.AsDuration() != time.Hour {
		t.Errorf("override = %v, %v; want 1 an hour, its own count", code, st)
	}
	if code, _ := one(t, c, d); code != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("override again = %v; want OVER_LIMIT", code)
	}
}
