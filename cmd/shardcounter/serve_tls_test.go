package main_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// testCA is a certificate authority made for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its certificate, PEM
}

// mustCA makes a CA and writes its certificate to dir/name.pem.
func mustCA(tb testing.TB, dir, name string) *testCA {
	tb.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(dir, name+".pem")
	os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	return &testCA{cert: cert, key: key, file: file}
}

// leaf makes a certificate of cn signed by ca, for a server at 127.0.0.1
// or a client, and writes it and its key to dir/cn.pem and dir/cn.key.
func (ca *testCA) leaf(tb testing.TB, dir, cn string, server bool) (certFile, keyFile string) {
	tb.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, cn+".pem"), filepath.Join(dir, cn+".key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}

// TestServeRESPTLS: TLS on the Redis port and client certificates on
// both ports, the certificate's CN naming the user: redis-cli --tls and
// go-redis with TLS, an HTTPS client with a certificate, and a missing
// or wrong certificate refused.
func TestServeRESPTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := mustCA(t, dir, "ca"), mustCA(t, dir, "other")
	srvCert, srvKey := ca.leaf(t, dir, "server", true)
	cliCert, cliKey := ca.leaf(t, dir, "writer", false)
	badCert, badKey := other.leaf(t, dir, "admin", false)
	users := filepath.Join(dir, "users")
	os.WriteFile(users, []byte("user writer on >writer-pw ~views:* +@read +@write\nuser admin on >admin-pw ~* +@all\n"), 0o600)
	s := StartServer(t, dir, "--users-file", users, "--resp-listen", "127.0.0.1:0",
		"--resp-tls-cert", srvCert, "--resp-tls-key", srvKey, "--tls-cert", srvCert, "--tls-key", srvKey, "--tls-client-ca", ca.file)
	h, p := s.respAddr(t)

	cli := func(args ...string) (string, error) {
		out, err := exec.Command("redis-cli", append([]string{"-h", h, "-p", p, "--tls", "--cacert", ca.file}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if got, _ := cli("--cert", cliCert, "--key", cliKey, "INCR", "views:1"); got != "1" {
		t.Fatalf("redis-cli --tls as writer by its certificate: %q", got)
	}
	if got, _ := cli("--cert", cliCert, "--key", cliKey, "INCR", "likes:1"); got != "NOPERM No permissions to access a key" {
		t.Fatalf("redis-cli --tls INCR likes:1 as writer: %q", got)
	}
	for name, args := range map[string][]string{"no certificate": nil, "a certificate of another CA": {"--cert", badCert, "--key", badKey}} {
		if got, _ := cli(append(args, "--no-auth-warning", "--user", "admin", "--pass", "admin-pw", "INCR", "views:1")...); strings.HasSuffix(got, "2") || !strings.Contains(strings.ToLower(got), "error") {
			t.Errorf("redis-cli with %s: %q, want the handshake refused", name, got)
		}
	}

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	kp, err := tls.LoadX509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(h, p), MaxRetries: -1,
		TLSConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{kp}}})
	defer rdb.Close()
	if v, err := rdb.Incr(ctx, "views:1").Result(); err != nil || v != 2 {
		t.Fatalf("go-redis over TLS: %d, %v", v, err)
	}
	if who, err := rdb.Do(ctx, "ACL", "WHOAMI").Text(); err != nil || who != "writer" {
		t.Fatalf("ACL WHOAMI over TLS: %q, %v", who, err)
	}

	url := strings.Replace(s.URL, "http://", "https://", 1)
	get := func(certs []tls.Certificate) (int, error) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url + "/v1/counters/views:1")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if st, err := get([]tls.Certificate{kp}); err != nil || st != http.StatusOK {
		t.Fatalf("HTTPS GET with the writer's certificate: %d, %v", st, err)
	}
	if _, err := get(nil); err == nil {
		t.Error("HTTPS without a client certificate was served")
	}
	bad, _ := tls.LoadX509KeyPair(badCert, badKey)
	if _, err := get([]tls.Certificate{bad}); err == nil {
		t.Error("HTTPS with a certificate of another CA was served")
	}
}
