package dialerr_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter/internal/dialerr"
)

// TestCause dials real addresses that fail in each way Cause words: a
// port nobody listens on, a host that does not resolve, a deadline, and an
// error of some other kind.
func TestCause(t *testing.T) {
	var d net.Dialer
	_, refused := d.Dial("tcp", "127.0.0.1:1") // loopback port 1 refuses at once
	_, unresolved := d.Dial("tcp", "nohost.invalid:80")
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, late := d.DialContext(ctx, "tcp", "127.0.0.1:1")
	other := fmt.Errorf("127.0.0.1:6379: %w", errors.New("WRONGPASS invalid username-password pair\nor user is disabled."))
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"Refused", fmt.Errorf("127.0.0.1:1 (localhost): dial error: %w", refused), "connection refused"},
		{"Unresolved", unresolved, "cannot resolve host nohost.invalid: "}, // then the resolver's reason
		{"Deadline", late, "no answer in time"},
		{"Other", other, "127.0.0.1:6379: WRONGPASS invalid username-password pair or user is disabled."},
		{"Joined", errors.Join(refused, refused), "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("the dial succeeded")
			}
			if got := dialerr.Cause(tc.err); got != tc.want && !(strings.HasSuffix(tc.want, ": ") && strings.HasPrefix(got, tc.want)) {
				t.Fatalf("Cause(%q) = %q, want %q", tc.err, got, tc.want)
			}
			if strings.Contains(dialerr.Cause(tc.err), "127.0.0.1:1") {
				t.Fatalf("Cause(%q) repeats the address", tc.err)
			}
		})
	}
}
