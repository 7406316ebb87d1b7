package main

import (
	"errors"
	"strings"
	"testing"
)

// TestServeRLSTLSFlags checks the usage errors of the rate-limit port's
// TLS flags, and that the good combinations pass: a certificate goes with
// its key and with --rls-listen, and --tls-client-ca may apply to the
// rate-limit port alone.
func TestServeRLSTLSFlags(t *testing.T) {
	rls := "--rls-listen 127.0.0.1:0 --rls-config r.yaml "
	for _, c := range []struct{ line, want string }{
		{rls + "--rls-tls-cert c.pem", "--rls-tls-cert and --rls-tls-key go together"},
		{rls + "--rls-tls-key k.pem", "--rls-tls-cert and --rls-tls-key go together"},
		{"--rls-tls-cert c.pem --rls-tls-key k.pem", "--rls-tls-cert needs --rls-listen"},
		{"--rls-listen 127.0.0.1:0 --rls-tls-cert c.pem --rls-tls-key k.pem", "--rls-listen and --rls-config go together"},
		{"--tls-client-ca ca.pem", "--tls-client-ca needs --tls-cert, --resp-tls-cert or --rls-tls-cert"},
		{rls + "--tls-client-ca ca.pem", "--tls-client-ca needs --tls-cert, --resp-tls-cert or --rls-tls-cert"},
		{rls + "--rls-tls-cert c.pem --rls-tls-key k.pem", ""},
		{rls + "--rls-tls-cert c.pem --rls-tls-key k.pem --tls-client-ca ca.pem", ""},
	} {
		m, ok := parseOrUsage(t, "serve", c.line)
		if !ok {
			t.Fatalf("serve %s: refused by its parse", c.line)
		}
		_, err := m.cmd.(*serveCommand).check(m.args)
		var u *usageError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("serve %s: %v, want it taken", c.line, err)
		case c.want != "" && (!errors.As(err, &u) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("serve %s: %v, want a usage error saying %q", c.line, err, c.want)
		}
	}
}
