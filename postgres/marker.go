package postgres

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardcounter/shardcounter"
)

// markSQL records a batch's marker ($1) in the batch's transaction, right
// before its COMMIT, and deletes up to two expired markers, oldest first:
// those older than $2, the marker (of the same form) of markerLife ago.
// Each batch deleting about as many as it adds keeps the table at the
// markers of the last markerLife. A second commit of the same batch waits
// here on the first one's uncommitted row and then fails with a unique
// violation (errMarkerFound) if the first committed.
const markSQL = `
WITH x AS (
	DELETE FROM shardcounter.batches WHERE id IN (
		SELECT id FROM shardcounter.batches WHERE id < $2 ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED)
)
INSERT INTO shardcounter.batches (id) VALUES ($1)`

// markerLife is how long a marker is kept: ten minutes, far past any
// write's deadline (MaxResolve). Markers are read only while their
// batch's writers wait, so, unlike request ids, which clients send again
// later, they need not last the dedupe window.
const markerLife = 10 * time.Minute

// errMarkerFound says that a re-applied batch found its marker: an earlier
// commit of it applied, and this one was rolled back.
var errMarkerFound = errors.New("the batch's marker is committed: an earlier commit of it applied")

// newMarker returns a batch's marker: the time t in microseconds since
// the Unix epoch, big-endian, so that markers sort by time, and 8 random
// bytes, so that it is unique without coordination between processes.
func newMarker(t time.Time) []byte {
	m := make([]byte, 16)
	binary.BigEndian.PutUint64(m, uint64(t.UnixMicro()))
	_, _ = rand.Read(m[8:]) // never fails (crypto/rand panics rather)
	return m
}

// isMarkerConflict reports whether err is the unique violation of markSQL.
func isMarkerConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == sqlUniqueViolation && pe.TableName == "batches"
}

// commitSent says how far a pipeline that ends in "markSQL; COMMIT" got
// when it failed with err. The server answers a pipeline's statements in
// order, so an error it sent (a PgError: a FATAL 57P01 to a session it
// ended while idle, say) before markSQL's answer came ends the pipeline
// before COMMIT ran: nothing was committed. Any other failure after the
// pipeline was sent (a connection lost, a FATAL after markSQL) may have
// come after the commit.
func commitSent(marked bool, err error) sent {
	var pe *pgconn.PgError
	if !marked && errors.As(err, &pe) {
		return beforeCommit
	}
	return atCommit
}

// MaxResolve bounds how long a lost commit answer is settled for when the
// caller's context has no earlier deadline: past it, the writes are
// outcome unknown.
const MaxResolve = 10 * time.Second

// resolveBackoff bounds the pause between attempts to resolve a batch.
const resolveBackoff = 200 * time.Millisecond

// resolve settles a batch whose commit got no answer (lost, an
// outcome-unknown error): it applies the batch again, with the same
// marker, on a new connection, until the store answers or ctx ends. The
// marker is a unique key written in the same commit as the increments,
// so of the two commits exactly one applies: either this one does (the
// first never committed), or it finds the marker (errMarkerFound) and the
// batch's outcomes are the first commit's, decided before its COMMIT was
// sent (first), without totals, which only the commit's answer carried
// for some (a caller reads them afresh). Past ctx the lost error stands.
func (s *CounterStore) resolve(ctx context.Context, b *batch, out []shardcounter.Outcome, lost error) ([]shardcounter.Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, MaxResolve)
	defer cancel()
	first := slices.Clone(out)
	pause := 10 * time.Millisecond
	for {
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, lost
		case <-t.C:
		}
		pause = min(2*pause, resolveBackoff)
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			continue
		}
		err = s.apply(ctx, conn.Conn(), true, b, out)
		conn.Release()
		switch {
		case err == nil:
			s.resolved.Add(1)
			return out, nil
		case errors.Is(err, errMarkerFound):
			s.resolved.Add(1)
			for i := range first {
				first[i].Total = nil
			}
			return first, nil
		case shardcounter.IsOutcomeUnknown(err), shardcounter.ErrorCode(err) == shardcounter.EUNAVAILABLE:
			continue // still away, or lost again: the marker still decides
		}
		return nil, err
	}
}

// Resolved returns how many batches whose commit answer was lost were
// settled by their markers.
func (s *CounterStore) Resolved() int64 { return s.resolved.Load() }

// queueMark queues markSQL for b (when it has a marker) at the end of q,
// setting *marked when its answer comes: a failure after that may have
// come after the COMMIT that follows it.
func queueMark(q *pgx.Batch, b *batch, marked *bool) {
	if b.marker == nil {
		*marked = true // no statement to tell: take every failure as at commit
		return
	}
	cutoff := make([]byte, 8)
	binary.BigEndian.PutUint64(cutoff, uint64(time.Now().Add(-markerLife).UnixMicro()))
	q.Queue(markSQL, b.marker, cutoff).Exec(func(pgconn.CommandTag) error {
		*marked = true
		return nil
	})
}
