package shardcounter

import (
	"strconv"
	"strings"
	"time"
)

// Bucket widths a window may have.
const (
	BucketMinute = Duration(time.Minute)
	BucketHour   = Duration(time.Hour)
	BucketDay    = Duration(24 * time.Hour)
)

// MaxWindowBuckets bounds a window's retention in buckets: a windowed read
// sums up to this many buckets on every shard (a week of minutes, 27
// years of days).
const MaxWindowBuckets = 7 * 24 * 60

// Duration is a time.Duration written as people write spans of time:
// "1m", "90m", "24h", "7d". It is how the API and the CLI spell a window's
// bucket and retention and a read's range.
type Duration time.Duration

// ParseDuration parses "7d", "36h", "1h30m" and the like: a whole number of
// days with the suffix d, or anything time.ParseDuration takes. It must be
// positive.
func ParseDuration(s string) (Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n <= 0 || n > 100*365 {
			return 0, Errorf(EINVALID, "duration %q is not a whole number of days from 1 to 36500: write 7d, 24h or 90m", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, Errorf(EINVALID, "duration %q cannot be read: write 7d, 24h or 90m", s)
		}
	}
	if d <= 0 {
		return 0, Errorf(EINVALID, "duration %q is not positive: write 7d, 24h or 90m", s)
	}
	return Duration(d), nil
}

// String writes d the way ParseDuration reads it, in whole days when it
// is some, and without zero units otherwise ("1h", not "1h0m0s").
func (d Duration) String() string {
	td := time.Duration(d)
	if td > 0 && td%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(td/(24*time.Hour)), 10) + "d"
	}
	s := td.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseDuration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Window configures a counter's time buckets: every write also lands in
// the bucket of its commit time (on its shard, so a window is as
// write-scalable as the counter), and buckets older than Retention are
// removed as a side effect of later writes.
type Window struct {
	Bucket    Duration `json:"bucket"`
	Retention Duration `json:"retention"`
}

// ParseWindow parses the CLI's BUCKET:RETENTION, such as "1h:7d".
func ParseWindow(s string) (*Window, error) {
	b, r, ok := strings.Cut(s, ":")
	if !ok {
		return nil, Errorf(EINVALID, "window %q is not BUCKET:RETENTION: write 1h:7d", s)
	}
	var w Window
	var err error
	if w.Bucket, err = ParseDuration(b); err != nil {
		return nil, err
	}
	if w.Retention, err = ParseDuration(r); err != nil {
		return nil, err
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return &w, nil
}

// Validate checks that the bucket is 1m, 1h or 1d and the retention a
// whole number of buckets, from one to MaxWindowBuckets.
func (w *Window) Validate() error {
	switch w.Bucket {
	case BucketMinute, BucketHour, BucketDay:
	default:
		return Errorf(EINVALID, "window bucket %s is not one of 1m, 1h, 1d", w.Bucket)
	}
	if w.Retention < w.Bucket || w.Retention%w.Bucket != 0 {
		return Errorf(EINVALID, "window retention %s is not a whole number of %s buckets", w.Retention, w.Bucket)
	}
	if n := w.Retention / w.Bucket; n > MaxWindowBuckets {
		return Errorf(EINVALID, "window retention %s is %d buckets of %s: the limit is %d; use wider buckets", w.Retention, n, w.Bucket, MaxWindowBuckets)
	}
	return nil
}

// BucketOf returns the start of the bucket holding t, in UTC: t
// truncated to the bucket width, so day buckets start at UTC midnight.
func (w *Window) BucketOf(t time.Time) time.Time {
	return t.Truncate(time.Duration(w.Bucket)).UTC()
}

// Interval is a span of time [From, To).
type Interval struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Bucket is one time bucket of a windowed counter: the sum of the writes
// committed in [Start, Start+width).
type Bucket struct {
	Start time.Time `json:"start"`
	Value int64     `json:"value"`
}

// Series is a windowed counter's buckets over an interval, for a chart:
// every bucket of width Bucket in [From, To), zeros included, oldest
// first.
type Series struct {
	ID      string    `json:"id"`
	Bucket  Duration  `json:"bucket"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Buckets []Bucket  `json:"buckets"`
}
