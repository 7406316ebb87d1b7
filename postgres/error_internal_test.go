package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardcounter/shardcounter"
)

// TestMapError covers the classifications that the other tests cannot
// provoke on demand: a connection lost mid-commit, a server crashing.
func TestMapError(t *testing.T) {
	for _, c := range []struct {
		name    string
		err     error
		commit  sent
		code    string
		unknown bool
	}{
		{"Overflow", &pgconn.PgError{Code: "22003"}, atCommit, shardcounter.EOUTOFRANGE, false},
		{"Deadlock", &pgconn.PgError{Code: "40P01"}, beforeCommit, shardcounter.EUNAVAILABLE, false},
		{"TooManyConnections", &pgconn.PgError{Code: "53300"}, atCommit, shardcounter.EUNAVAILABLE, false},
		{"ShutdownBeforeCommit", &pgconn.PgError{Code: "57P01"}, beforeCommit, shardcounter.EUNAVAILABLE, false},
		{"ShutdownAtCommit", &pgconn.PgError{Code: "57P01"}, atCommit, shardcounter.EOUTCOMEUNKNOWN, true},
		{"Refused", refused(t), atCommit, shardcounter.EUNAVAILABLE, false},
		{"EOFAtCommit", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), atCommit, shardcounter.EOUTCOMEUNKNOWN, true},
		{"EOFBeforeCommit", io.EOF, beforeCommit, shardcounter.EUNAVAILABLE, false},
		{"DeadlineAtCommit", context.DeadlineExceeded, atCommit, shardcounter.EOUTCOMEUNKNOWN, true},
		{"DeadlineBeforeCommit", context.DeadlineExceeded, beforeCommit, shardcounter.EUNAVAILABLE, false},
		{"Syntax", &pgconn.PgError{Code: "42601"}, atCommit, shardcounter.EINTERNAL, false},
		{"UnclassifiedAtCommit", errors.New("boom"), atCommit, shardcounter.EOUTCOMEUNKNOWN, true},
		{"Unclassified", errors.New("boom"), beforeCommit, shardcounter.EINTERNAL, false},
		{"Domain", shardcounter.Errorf(shardcounter.ENOTFOUND, "x"), atCommit, shardcounter.ENOTFOUND, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := mapError("op", c.err, c.commit)
			if got := shardcounter.ErrorCode(err); got != c.code {
				t.Errorf("code = %q, want %q (%v)", got, c.code, err)
			}
			if got := shardcounter.IsOutcomeUnknown(err); got != c.unknown {
				t.Errorf("outcome unknown = %v, want %v (%v)", got, c.unknown, err)
			}
		})
	}
	if mapError("op", nil, atCommit) != nil {
		t.Error("mapError(nil) != nil")
	}
}

// refused returns the error of a connection attempt that nothing answers:
// no statement was sent, whatever the caller was about to do.
func refused(tb testing.TB) error {
	_, err := pgconn.Connect(context.Background(), "postgres://u@127.0.0.1:1/db?sslmode=disable&connect_timeout=5")
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		tb.Fatalf("connect to port 1 = %v, want a *pgconn.ConnectError", err)
	}
	return err
}
