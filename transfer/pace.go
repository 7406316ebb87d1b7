package transfer

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// DefaultBackupRate is the pace, in bytes a second, at which BackupPath
// streams a backup unless its rate parameter says otherwise: reading and
// sending a store's files as fast as the disk and the network go takes
// the CPU and the disk from the server's writes (back-to-back backups of
// a Pebble store held its writes to about half their rate); at this pace
// a store of a million counters is sent in seconds.
const DefaultBackupRate = 64 << 20

// backupRate returns the rate a backup request asks for: ?rate=BYTES a
// second, 0 for no pacing; DefaultBackupRate without one.
func backupRate(r *http.Request) (int64, error) {
	q, err := shttp.CheckQuery(r, "rate")
	if err != nil {
		return 0, err
	}
	v := q.Get("rate")
	if v == "" {
		return DefaultBackupRate, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, shardcounter.Errorf(shardcounter.EINVALID, "rate %q: give bytes a second, 0 for no pacing", v)
	}
	return n, nil
}

// pacedWriter writes to w at most rate bytes a second on average, in
// chunks of paceChunk, sleeping between them: the reads of the files it
// is fed are spread out as much as the writes.
type pacedWriter struct {
	ctx   context.Context
	w     io.Writer
	rate  int64
	start time.Time
	n     int64
}

const paceChunk = 256 << 10

func paced(ctx context.Context, w io.Writer, rate int64) io.Writer {
	if rate <= 0 {
		return w
	}
	return &pacedWriter{ctx: ctx, w: w, rate: rate, start: time.Now()}
}

func (p *pacedWriter) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		n, err := p.w.Write(b[:min(len(b), paceChunk)])
		written += n
		p.n += int64(n)
		b = b[n:]
		if err != nil {
			return written, err
		}
		due := p.start.Add(time.Duration(float64(p.n) / float64(p.rate) * float64(time.Second)))
		if wait := time.Until(due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-p.ctx.Done():
				t.Stop()
				return written, p.ctx.Err()
			}
		}
	}
	return written, nil
}
