package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardcounter/shardcounter"
)

// SQLSTATE codes the store acts on.
const (
	sqlNumericOutOfRange = "22003" // bigint overflow: the write is refused, never wrapped
	sqlUniqueViolation   = "23505"
	sqlSerialization     = "40001"
	sqlDeadlock          = "40P01"
	// sqlRestart is raised by shardcounter.restart_batch (migration 6):
	// the statement found items it does not decide, and the batch takes
	// the general path.
	sqlRestart = "SC001"
)

// sent says whether a failed call had already asked the server to commit.
type sent bool

const (
	beforeCommit sent = false // nothing can have been committed
	atCommit     sent = true  // a commit (or an autocommit statement) was sent
)

// mapError turns an error from pgx or PostgreSQL into a *shardcounter.Error.
// It is the one place where the store classifies failures. op names the
// operation for the message. commit says whether the failed call had sent a
// statement that commits.
//
// A failure before anything committing was sent, or an error the server
// reported for a statement, means nothing was applied: unreachable servers,
// deadlines and shutdowns are EUNAVAILABLE, as the domain promises ("the
// write was not applied"). A transport failure after a commit was sent
// leaves the outcome unknown: EOUTCOMEUNKNOWN, never EUNAVAILABLE, so
// that no caller takes it for "not applied". The engine resolves most of
// those by the batch's marker before a caller sees them.
func mapError(op string, err error, commit sent) error {
	if err == nil {
		return nil
	}
	var se *shardcounter.Error
	if errors.As(err, &se) {
		return err
	}
	if isConnectError(err) || pgconn.SafeToRetry(err) {
		commit = beforeCommit // nothing reached the server
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return mapPgError(op, pe, commit)
	}
	if commit {
		return outcomeUnknown(op, "the commit was sent but no answer came back", err)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || pgconn.Timeout(err):
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "%s: PostgreSQL did not answer in time: %v", op, err)
	case isConnectionError(err):
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "%s: PostgreSQL cannot be reached: %v", op, err)
	}
	return shardcounter.Errorf(shardcounter.EINTERNAL, "%s: %v", op, err)
}

// outcomeUnknown is the error of a write whose commit was sent and whose
// success was not reported.
func outcomeUnknown(op, why string, err error) error {
	return &shardcounter.Error{
		Code:           shardcounter.EOUTCOMEUNKNOWN,
		Message:        op + ": " + why + " (" + err.Error() + ")" + shardcounter.OutcomeUnknownCure,
		OutcomeUnknown: true,
	}
}

// mapPgError maps an error that PostgreSQL reported. A statement that got
// an error response did not commit, with one exception: a server that is
// shutting down or crashing (class 57P) or losing the connection (class
// 08) may end a session after a commit was flushed and before its answer
// was sent (PostgreSQL says so when it cancels a wait for synchronous
// replication), so on a committing call those leave the outcome unknown.
func mapPgError(op string, pe *pgconn.PgError, commit sent) error {
	msg := op + ": " + pe.Message + " (SQLSTATE " + pe.Code + ")"
	switch {
	case pe.Code == sqlNumericOutOfRange:
		return shardcounter.Errorf(shardcounter.EOUTOFRANGE, "%s: the value would leave the int64 range", op)
	case pe.Code == sqlUniqueViolation:
		return shardcounter.Errorf(shardcounter.EEXISTS, "%s", msg)
	case pe.Code == sqlSerialization || pe.Code == sqlDeadlock:
		// The transaction was rolled back; a retry is safe.
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "%s: retry", msg)
	case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "57P"):
		if commit {
			return outcomeUnknown(op, "the server ended the session while the write was committing", pe)
		}
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "%s", msg)
	case strings.HasPrefix(pe.Code, "53"), // insufficient resources: too many connections, disk full
		strings.HasPrefix(pe.Code, "57"), // operator intervention: a statement timeout, a cancel
		strings.HasPrefix(pe.Code, "58"), // system error: an I/O error of the server
		strings.HasPrefix(pe.Code, "XX"), // the server's internal error
		pe.Code == "55P03",               // lock not available
		pe.Code == "25006":               // read-only transaction: a standby or a read-only server
		// The statement got an error response, so it did not commit: a
		// failure of the store, not applied.
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "%s", msg)
	}
	return shardcounter.Errorf(shardcounter.EINTERNAL, "%s", msg)
}

// isConnectError reports whether err is a failure to establish a
// connection, when no statement can have been sent.
func isConnectError(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce)
}

// isConnectionError reports whether err is a failure of the connection
// itself rather than of a statement.
func isConnectionError(err error) bool {
	if isConnectError(err) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, pgconn.ErrConnClosed)
}
