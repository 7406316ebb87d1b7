package main_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

var rlsAddrRE = regexp.MustCompile(`msg="serving Envoy's rate-limit service" addr=(\S+)`)

// TestServeRLS runs serve --rls-listen --rls-config as an operator would,
// and calls it with go-control-plane's generated client as Envoy does: a
// sliding window of 2 a day per address (so that no window's edge falls
// inside the test), then SIGHUP with a new file (in force at once, the
// rule afresh), then SIGHUP with a broken one (the previous kept). One
// of the two flags alone, or a broken file at start, is refused.
func TestServeRLS(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "rls")
	if err := os.Mkdir(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(limit string) {
		t.Helper()
		y := "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: day, requests_per_unit: " + limit + "}\n" +
			"    metadata: {shardcounter: {window: sliding}}\n"
		if err := os.WriteFile(filepath.Join(conf, "edge.yaml"), []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	Run(t, dir, nil, "serve", "--rls-listen", "127.0.0.1:0").MustFail(t, 2)
	write("[")
	if msg := Run(t, dir, nil, "serve", "--listen", "127.0.0.1:0", "--store", "pebble:"+filepath.Join(dir, "bad"),
		"--rls-listen", "127.0.0.1:0", "--rls-config", conf).MustFail(t, 1); !strings.Contains(msg, "--rls-config") {
		t.Errorf("a broken --rls-config: %q", msg)
	}

	write("2")
	s := StartServer(t, dir, "--rls-listen", "127.0.0.1:0", "--rls-config", conf)
	s.waitLog(t, "serving Envoy's rate-limit service")
	m := rlsAddrRE.FindStringSubmatch(s.Logs())
	if m == nil {
		t.Fatalf("no rate-limit service address in the log:\n%s", s.Logs())
	}
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewRateLimitServiceClient(conn)
	ask := func() *pb.RateLimitResponse_DescriptorStatus {
		t.Helper()
		r, err := c.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlpb.RateLimitDescriptor{
			{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}},
		}})
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		if r.OverallCode != r.Statuses[0].Code {
			t.Errorf("overall %v, descriptor %v", r.OverallCode, r.Statuses[0].Code)
		}
		return r.Statuses[0]
	}
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		if st := ask(); st.Code != want || st.CurrentLimit.GetRequestsPerUnit() != 2 {
			t.Fatalf("call %d: %v; want %v of 2 a day", i, st, want)
		}
	}

	write("5")
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "SIGHUP: --rls-config reloaded")
	if st := ask(); st.Code != pb.RateLimitResponse_OK || st.LimitRemaining != 4 || st.CurrentLimit.GetRequestsPerUnit() != 5 {
		t.Errorf("after SIGHUP: %v; want 5 a day, afresh", st)
	}
	write("[")
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "SIGHUP: keeping the previous --rls-config")
	if st := ask(); st.Code != pb.RateLimitResponse_OK || st.LimitRemaining != 3 {
		t.Errorf("after a broken file: %v; want the previous rules", st)
	}
	if code := s.Stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("serve exited %d on SIGTERM:\n%s", code, s.Logs())
	}
}
