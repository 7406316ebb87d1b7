package decide_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/shardcounter/shardcounter/decide"
)

// view is a View over maps, written for the tests: each counter's record,
// shard values (0 when absent), request ids with when they were recorded,
// present members, bucket values and shard sketches. noShards and
// noBuckets make it a view that does not know those (as Pebble's shards
// and PostgreSQL's buckets); fail makes every answer an error.
type view struct {
	counters  map[string]decide.Counter
	shards    map[string]int64     // "counter/shard"
	requests  map[string]time.Time // "counter/id"
	members   map[string]bool      // "counter/member"
	buckets   map[string]int64     // "counter/unix"
	sketches  map[string][]byte    // "counter/shard"
	noShards  bool
	noBuckets bool
	fail      error
	asked     []string // every question, in order
}

func newView() *view {
	return &view{
		counters: map[string]decide.Counter{}, shards: map[string]int64{}, requests: map[string]time.Time{},
		members: map[string]bool{}, buckets: map[string]int64{}, sketches: map[string][]byte{},
	}
}

var errView = errors.New("the view failed")

func (v *view) Counter(id string) (decide.Counter, error) {
	v.asked = append(v.asked, "counter "+id)
	return v.counters[id], v.fail
}

func (v *view) Shard(counter string, shard int) (int64, bool, error) {
	v.asked = append(v.asked, fmt.Sprintf("shard %s/%d", counter, shard))
	return v.shards[fmt.Sprintf("%s/%d", counter, shard)], !v.noShards, v.fail
}

func (v *view) Request(counter, id string) (time.Time, bool, error) {
	v.asked = append(v.asked, "request "+counter+"/"+id)
	at, ok := v.requests[counter+"/"+id]
	return at, ok, v.fail
}

func (v *view) Member(counter, member string) (bool, error) {
	v.asked = append(v.asked, "member "+counter+"/"+member)
	return v.members[counter+"/"+member], v.fail
}

func (v *view) Bucket(counter string, start time.Time) (int64, bool, error) {
	v.asked = append(v.asked, fmt.Sprintf("bucket %s/%d", counter, start.Unix()))
	return v.buckets[fmt.Sprintf("%s/%d", counter, start.Unix())], !v.noBuckets, v.fail
}

func (v *view) Sketch(counter string, shard int) ([]byte, error) {
	v.asked = append(v.asked, fmt.Sprintf("sketch %s/%d", counter, shard))
	return v.sketches[fmt.Sprintf("%s/%d", counter, shard)], v.fail
}

// setShards sets a counter's shard values and its total (their sum).
func (v *view) setShards(id string, vals ...int64) {
	c := v.counters[id]
	c.Total = 0
	for i, x := range vals {
		v.shards[fmt.Sprintf("%s/%d", id, i)] = x
		c.Total += x
	}
	v.counters[id] = c
}
