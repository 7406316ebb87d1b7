package bolt

import (
	"context"
	"io"

	bbolt "go.etcd.io/bbolt"

	"github.com/shardcounter/shardcounter"
)

// Backup writes a consistent copy of the whole database file to w while
// the store goes on serving: one read transaction's Tx.WriteTo, which
// writers do not wait for (bbolt lets one writer commit beside readers).
// A store opened on the copy holds what the store held when Backup
// began. size, when not nil, is told the copy's size before it is
// written (an HTTP reply's Content-Length, so that a copy cut short is
// seen to be). It returns the bytes written.
func (s *CounterStore) Backup(ctx context.Context, w io.Writer, size func(int64)) (int64, error) {
	var n int64
	err := s.db.View(func(tx *bbolt.Tx) error {
		if size != nil {
			size(tx.Size())
		}
		var err error
		n, err = tx.WriteTo(ctxWriter{ctx, w})
		return err
	})
	if err != nil {
		return n, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "bolt: backup: %v", err)
	}
	return n, nil
}

// ctxWriter stops a long copy once its context is done: a client that
// goes away mid-backup frees the read transaction.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
