package main_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
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

// TestServeRLSTLS runs the rate-limit port over TLS (--rls-tls-cert,
// --rls-tls-key) with client certificates (--tls-client-ca):
// go-control-plane's generated client over TLS with a certificate the CA
// signed gets a decision; a plaintext client, a TLS client without a
// certificate and one with another CA's are refused; SIGHUP rereads the
// certificate, which the next handshake serves.
func TestServeRLSTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := mustCA(t, dir, "ca"), mustCA(t, dir, "other")
	srvCert, srvKey := ca.leaf(t, dir, "server", true)
	cliCert, cliKey := ca.leaf(t, dir, "envoy", false)
	badCert, badKey := other.leaf(t, dir, "intruder", false)
	conf := filepath.Join(dir, "edge.yaml")
	if err := os.WriteFile(conf, []byte("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: day, requests_per_unit: 2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := StartServer(t, dir, "--rls-listen", "127.0.0.1:0", "--rls-config", conf,
		"--rls-tls-cert", srvCert, "--rls-tls-key", srvKey, "--tls-client-ca", ca.file)
	s.waitLog(t, "serving Envoy's rate-limit service")
	m := rlsAddrRE.FindStringSubmatch(s.Logs())
	if m == nil {
		t.Fatalf("no rate-limit service address in the log:\n%s", s.Logs())
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	pair := func(cert, key string) []tls.Certificate {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{kp}
	}
	ask := func(creds credentials.TransportCredentials) (*pb.RateLimitResponse, error) {
		t.Helper()
		conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return pb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: "edge", Descriptors: []*rlpb.RateLimitDescriptor{
			{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}},
		}})
	}
	good := credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: pair(cliCert, cliKey)})
	if r, err := ask(good); err != nil || r.OverallCode != pb.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != 1 {
		t.Fatalf("over TLS with the CA's client certificate: %v, %v; want OK, 1 left", r, err)
	}
	for name, creds := range map[string]credentials.TransportCredentials{
		"plaintext":                 insecure.NewCredentials(),
		"TLS without a certificate": credentials.NewTLS(&tls.Config{RootCAs: roots}),
		"TLS with another CA's":     credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: pair(badCert, badKey)}),
	} {
		if r, err := ask(creds); err == nil {
			t.Errorf("%s: answered %v, want the call refused", name, r)
		}
	}

	// A new certificate, reread on SIGHUP, is served from the next
	// handshake on.
	newCert, newKey := ca.leaf(t, dir, "server2", true)
	if err := os.Rename(newCert, srvCert); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(newKey, srvKey); err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "SIGHUP: Redis-port and rate-limit-port certificates and client CAs reloaded")
	tc, err := tls.Dial("tcp", m[1], &tls.Config{RootCAs: roots, Certificates: pair(cliCert, cliKey), NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	if cn := tc.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "server2" {
		t.Errorf("after SIGHUP the port serves the certificate of %q, want server2's", cn)
	}
	tc.Close()
	if r, err := ask(good); err != nil || r.OverallCode != pb.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("over TLS after SIGHUP: %v, %v; want OK, 0 left", r, err)
	}
	if code := s.Stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("serve exited %d on SIGTERM:\n%s", code, s.Logs())
	}
}
