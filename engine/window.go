package engine

import (
	"context"
	"time"

	"github.com/shardcounter/shardcounter"
)

// ReadWindow returns the sum of a windowed counter's writes committed from
// the start of the bucket holding now−last to the end of the current
// bucket, by the engine's clock (Config.Now). The range is cut to the
// buckets the counter retains; Reading.Window says which interval the sum
// covers.
func (e *Engine) ReadWindow(ctx context.Context, id string, last time.Duration) (*shardcounter.Reading, error) {
	c, span, err := e.window(ctx, id, last, 0)
	if err != nil {
		return nil, err
	}
	return e.store.ReadWindow(ctx, c.ID, span.From, span.To)
}

// ReadSeries returns a windowed counter's buckets over the last span of
// time, summed into buckets of width bucket (a multiple of the counter's
// own; 0 means the counter's own), oldest first, zeros included. The
// first bucket is the one holding now−last, or the first whole one the
// counter retains; the last is the current one.
func (e *Engine) ReadSeries(ctx context.Context, id string, last, bucket time.Duration) (*shardcounter.Series, error) {
	c, span, err := e.window(ctx, id, last, bucket)
	if err != nil {
		return nil, err
	}
	width := bucket
	if width == 0 {
		width = time.Duration(c.Window.Bucket)
	}
	got, err := e.store.ReadSeries(ctx, c.ID, span.From, span.To)
	if err != nil {
		return nil, err
	}
	s := &shardcounter.Series{ID: c.ID, Bucket: shardcounter.Duration(width), From: span.From, To: span.To}
	s.Buckets = make([]shardcounter.Bucket, span.To.Sub(span.From)/width)
	for i := range s.Buckets {
		s.Buckets[i].Start = span.From.Add(time.Duration(i) * width)
	}
	for _, b := range got {
		if i := int(b.Start.Sub(span.From) / width); b.Start.Before(span.From) || i >= len(s.Buckets) {
			return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "store returned bucket %v outside [%v, %v)", b.Start, span.From, span.To)
		} else {
			s.Buckets[i].Value += b.Value
		}
	}
	return s, nil
}

// window checks a windowed read of the last span of time in buckets of
// width bucket (0: the counter's own) and returns the counter and the
// interval to read: aligned to bucket, ending with the current bucket,
// and starting no earlier than the oldest whole bucket the counter
// retains.
func (e *Engine) window(ctx context.Context, id string, last, bucket time.Duration) (*shardcounter.Counter, shardcounter.Interval, error) {
	var span shardcounter.Interval
	if err := shardcounter.ValidateID("counter id", id); err != nil {
		return nil, span, err
	}
	if last <= 0 {
		return nil, span, shardcounter.Errorf(shardcounter.EINVALID, "last %v is not positive: give the span to read, such as 24h", last)
	}
	if bucket < 0 {
		return nil, span, shardcounter.Errorf(shardcounter.EINVALID, "bucket %v is negative: give a multiple of the counter's bucket, or 0 for its own", bucket)
	}
	c, err := e.store.GetCounter(ctx, id)
	if err != nil {
		return nil, span, err
	}
	w := c.Window
	if w == nil {
		return nil, span, shardcounter.Errorf(shardcounter.EINVALID, "counter %q has no window, so it keeps no sums over time: read its total without last, or create a counter with a window (bucket and retention) to read spans of time", id)
	}
	own, retention := time.Duration(w.Bucket), time.Duration(w.Retention)
	if bucket == 0 {
		bucket = own
	}
	if bucket%own != 0 {
		return nil, span, shardcounter.Errorf(shardcounter.EINVALID, "bucket %s is not a multiple of counter %q's %s buckets", shardcounter.Duration(bucket), id, w.Bucket)
	}
	if bucket > retention {
		return nil, span, shardcounter.Errorf(shardcounter.EINVALID, "bucket %s is wider than counter %q's retention of %s: give at most %s", shardcounter.Duration(bucket), id, w.Retention, w.Retention)
	}
	now := e.cfg.Now()
	// The counter keeps retention/own buckets, the current one included.
	oldest := w.BucketOf(now).Add(own - retention)
	span.To = now.Truncate(bucket).Add(bucket).UTC()
	span.From = now.Add(-last).Truncate(bucket).UTC()
	if span.From.Before(oldest) {
		span.From = oldest.Add(bucket - 1).Truncate(bucket).UTC() // the first whole bucket retained
	}
	if !span.From.Before(span.To) {
		span.From = span.To.Add(-bucket)
	}
	return c, span, nil
}
