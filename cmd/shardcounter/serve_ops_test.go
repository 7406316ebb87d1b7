package main_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// waitLog waits until the server's log contains s, for a bounded time.
func (s *Server) waitLog(tb testing.TB, want string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.Logs(), want) {
		if time.Now().After(deadline) {
			tb.Fatalf("the log never said %q:\n%s", want, s.Logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// status sends a request with a bearer token (none when "") and returns
// the reply's status.
func status(tb testing.TB, c *http.Client, method, url, token string) int {
	tb.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestServeTokenReload: an unauthenticated write gets 401 and changes
// nothing; SIGHUP swaps the tokens for the file's new ones; a file that
// became unusable keeps the previous tokens in force.
func TestServeTokenReload(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("old-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := StartServer(t, dir, "--auth-token-file", tokens)
	c := http.DefaultClient
	if got := status(t, c, "POST", s.URL+"/v1/counters/a/increment", ""); got != http.StatusUnauthorized {
		t.Fatalf("unauthenticated increment: %d, want 401", got)
	}
	if got := status(t, c, "GET", s.URL+"/v1/counters/a", "old-token"); got != http.StatusNotFound {
		t.Fatalf("read after the refused increment: %d, want 404 (the increment created nothing)", got)
	}

	if err := os.WriteFile(tokens, []byte("new-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "auth tokens reloaded")
	if got := status(t, c, "GET", s.URL+"/v1/counters", "old-token"); got != http.StatusUnauthorized {
		t.Fatalf("old token after reload: %d, want 401", got)
	}
	if got := status(t, c, "GET", s.URL+"/v1/counters", "new-token"); got != http.StatusOK {
		t.Fatalf("new token after reload: %d, want 200", got)
	}

	if err := os.WriteFile(tokens, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	s.waitLog(t, "keeping the previous auth tokens")
	if got := status(t, c, "GET", s.URL+"/v1/counters", ""); got != http.StatusUnauthorized {
		t.Fatalf("no token after an empty file's reload: %d, want 401: authentication must stay on", got)
	}
	if got := status(t, c, "GET", s.URL+"/v1/counters", "new-token"); got != http.StatusOK {
		t.Fatalf("new token after a failed reload: %d, want 200", got)
	}
	if code := s.Stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}
}

// TestServeUnprotectedWarning: every interface and no token is worth a
// warning; loopback without a token is not.
func TestServeUnprotectedWarning(t *testing.T) {
	dir := t.TempDir()
	store := "bolt:" + filepath.Join(dir, "c.db")
	s := StartServerEnv(t, dir, nil, "--listen", "0.0.0.0:0", "--store", store)
	s.waitLog(t, "UNPROTECTED")
	s.Stop(t, syscall.SIGTERM)

	s = StartServer(t, t.TempDir())
	s.Stop(t, syscall.SIGTERM)
	if strings.Contains(s.Logs(), "UNPROTECTED") {
		t.Fatalf("warning on loopback:\n%s", s.Logs())
	}
}

// TestServeJSONLog: --log-format json --log-level debug gives one JSON
// object a line, with a line per request that names its route, status
// and request id.
func TestServeJSONLog(t *testing.T) {
	dir := t.TempDir()
	s := StartServer(t, dir, "--log-format", "json", "--log-level", "debug")
	req, _ := http.NewRequest("POST", s.URL+"/v1/counters/likes/increment", nil)
	req.Header.Set("X-Request-Id", "json-log-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	s.waitLog(t, "json-log-1")
	s.Stop(t, syscall.SIGTERM)
	var found bool
	for line := range strings.Lines(s.Logs()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if rec["request_id"] == "json-log-1" {
			found = true
			if rec["level"] != "DEBUG" || rec["route"] != "/v1/counters/{id}/increment" || rec["status"] != float64(200) || rec["method"] != "POST" {
				t.Errorf("request line %v", rec)
			}
		}
	}
	if !found {
		t.Fatalf("no request line:\n%s", s.Logs())
	}
}

// TestServeTLS serves HTTPS with a certificate made for the test; the
// client reaches it only over TLS.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := mustCert(t, dir)
	s := StartServer(t, dir, "--tls-cert", certFile, "--tls-key", keyFile)
	url := strings.Replace(s.URL, "http://", "https://", 1)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	client := shttp.NewClient(url)
	client.HTTPClient = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	ctx := context.Background()
	if _, err := client.WriteCounter(ctx, shardcounter.Write{Counter: "tls", Delta: 2}); err != nil {
		t.Fatal(err)
	}
	if r, err := client.ReadCounter(ctx, "tls", ""); err != nil || r.Value != 2 {
		t.Fatalf("read over TLS: %+v, %v", r, err)
	}
	if got := status(t, http.DefaultClient, "GET", s.URL+"/healthz", ""); got != http.StatusBadRequest {
		t.Fatalf("plain HTTP to the TLS port: %d, want 400", got)
	}
	if !strings.Contains(s.Logs(), "tls=true") {
		t.Fatalf("start line does not say tls=true:\n%s", s.Logs())
	}
}

// mustCert writes a self-signed certificate for 127.0.0.1 and its key to
// dir, and returns their paths and a pool that trusts the certificate.
func mustCert(tb testing.TB, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "shardcounter test"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestServeFlagErrors(t *testing.T) {
	dir := t.TempDir()
	base := []string{"serve", "--listen", "127.0.0.1:0", "--store", "bolt:" + filepath.Join(dir, "c.db")}
	for _, args := range [][]string{
		{"--log-format", "xml"},
		{"--log-level", "loud"},
		{"--tls-cert", "cert.pem"},
		{"--tls-key", "key.pem"},
		{"--request-timeout", "0s"},
		{"--max-concurrent", "0"},
	} {
		Run(t, dir, nil, append(base, args...)...).MustFail(t, 2)
	}
	// A certificate that cannot be loaded fails at start, exit 1.
	msg := Run(t, dir, nil, append(base, "--tls-cert", "nope.pem", "--tls-key", "nope.key")...).MustFail(t, 1)
	if !strings.Contains(msg, "--tls-cert") {
		t.Fatalf("message %q does not name the flag", msg)
	}
}

// TestServeUnreachableStore: serve with a store nobody answers at exits 1
// with one line on stderr that names the DSN with its password masked,
// what was tried, why it failed and what to check, and nothing else (no
// line of the Redis client's own, no cause said twice, no words of a
// failed write).
func TestServeUnreachableStore(t *testing.T) {
	// Port 1 on the loopback refuses connections at once.
	for _, tc := range []struct {
		name, dsn, masked, tried, check string
	}{
		{"Redis", "redis://:secret@127.0.0.1:1/3", "redis://:xxxxx@127.0.0.1:1/3", "cannot connect to 127.0.0.1:1 (database 3)", "check that redis-server runs there"},
		{"RedisCluster", "redis+cluster://:secret@127.0.0.1:1?addr=127.0.0.1:2", "redis+cluster://:xxxxx@127.0.0.1:1?addr=127.0.0.1:2", "cannot reach the cluster through its seed nodes 127.0.0.1:1, 127.0.0.1:2", "check that its nodes run there"},
		{"Postgres", "postgres://bob:secret@localhost:1/app?sslmode=disable", "postgres://bob:xxxxx@localhost:1/app?sslmode=disable", `cannot connect to localhost:1 (database "app", user "bob")`, "check that PostgreSQL runs there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			res := Run(t, dir, nil, "serve", "--listen", "127.0.0.1:0", "--store", tc.dsn)
			msg := res.MustFail(t, 1)
			want := "shardcounter serve: cannot open store " + tc.masked + ": "
			switch {
			case res.Stdout != "":
				t.Errorf("stdout %q, want nothing", res.Stdout)
			case strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n"):
				t.Errorf("stderr is not one line:\n%s", msg)
			case !strings.HasPrefix(msg, want):
				t.Errorf("stderr %q does not start %q", msg, want)
			case strings.Contains(msg, "secret"):
				t.Errorf("stderr %q shows the password", msg)
			case !strings.Contains(msg, tc.tried) || !strings.Contains(msg, tc.check):
				t.Errorf("stderr %q does not say %q and %q", msg, tc.tried, tc.check)
			case strings.Count(msg, "connection refused") != 1 || strings.Contains(msg, "dial"):
				t.Errorf("stderr %q does not say connection refused once, in those words", msg)
			case strings.Contains(msg, "applied") || strings.Contains(msg, "retry"):
				t.Errorf("stderr %q words it as a failed write", msg)
			}
		})
	}
}

// TestServePprof serves Go's profiles on --pprof-listen, and only there:
// the API's port has none.
func TestServePprof(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := StartServer(t, t.TempDir(), "--pprof-listen", addr)
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/allocs", "/debug/pprof/profile?seconds=1"} {
		if got := status(t, http.DefaultClient, "GET", "http://"+addr+path, ""); got != http.StatusOK {
			t.Errorf("GET %s on --pprof-listen: %d, want 200", path, got)
		}
	}
	if got := status(t, http.DefaultClient, "GET", s.URL+"/debug/pprof/", ""); got != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/ on the API's port: %d, want 404", got)
	}
}
