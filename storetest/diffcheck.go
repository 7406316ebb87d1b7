package storetest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/sketch"
)

// This file is the differential test's comparing half: a batch's
// outcomes, then what both stores read after it.

// fail reports the first divergence, with what replays it.
func (d *diff) fail(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("differential (seed %d, replay with %s=%d): %s", d.seed, DiffSeedEnv, d.seed, fmt.Sprintf(format, args...))
}

// apply sends a batch to both and compares each item's outcome.
func (d *diff) apply(incs []shardcounter.Increment) {
	d.t.Helper()
	d.batches++
	d.items += len(incs)
	mout, err := d.model.Apply(ctx, slices.Clone(incs))
	if err != nil {
		d.t.Fatalf("model: Apply: %v", err)
	}
	sout, err := d.store.Apply(ctx, slices.Clone(incs))
	if err != nil {
		var b strings.Builder
		for i, inc := range incs {
			fmt.Fprintf(&b, "\n\titem %d %s: model %s", i, d.incString(inc), outcomeString(mout[i]))
		}
		d.fail("batch %d (%d items, at %s): the whole batch failed on the store: %v; its items:%s", d.batches, len(incs), d.clk.Now().Format(time.DateTime), err, b.String())
	}
	if len(sout) != len(incs) {
		d.fail("batch %d: %d outcomes for %d items", d.batches, len(sout), len(incs))
	}
	d.last = batchRun{incs, mout, sout}
	for i, inc := range incs {
		d.tally[outcomeKind(mout[i])]++
		if t := inc.Take; t != nil && t.Remove && mout[i].Err == nil {
			d.tally[map[bool]string{true: "state kept", false: "state removed"}[mout[i].Skipped]]++
		}
		if a := mout[i].Applied; a != nil {
			switch {
			case *a == 0:
				d.tally["bounded skipped"]++
			case *a != incs[i].Delta:
				d.tally["bounded saturated"]++
			default:
				d.tally["bounded applied"]++
			}
		}
		m, s := mout[i], sout[i]
		if d.split && m.Total != nil && s.Total != nil && slices.Contains(held(incs, mout, i), *s.Total) {
			s.Total = m.Total // a value the counter held after the item, in a batch of several steps
		}
		if !d.sameOutcome(m, s, d.totals && !d.isApprox(inc.Counter)) {
			d.fail("batch %d (at %s) item %d of %d, %s: model %s, store %s%s", d.batches, d.clk.Now().Format(time.DateTime), i, len(incs), d.incString(inc), outcomeString(m), outcomeString(s), d.related(incs, mout, sout, i))
		}
	}
}

// held returns the values item i's counter held, per the model, from
// the item's own application (from the batch's start, for a duplicate) to
// the batch's end, applying the batch's items on it in order: the totals
// a store whose batch is several atomic steps may give the item. Those of
// a sum or distinct counter only: an approx counter's are estimates.
func held(incs []shardcounter.Increment, out []shardcounter.Outcome, i int) []int64 {
	v := *out[i].Total // the value after the batch
	vals := []int64{v}
	for j := len(incs) - 1; j > i || (j >= 0 && out[i].Duplicate); j-- {
		inc, o := incs[j], out[j]
		if inc.Counter != incs[i].Counter || o.Err != nil || o.Duplicate || o.Unchanged || o.Skipped || inc.Sketch != nil {
			continue
		}
		if inc.Member != "" && inc.Delta != -1 && inc.Delta != 1 {
			continue
		}
		if o.Applied != nil {
			v -= *o.Applied // a bounded item's (Increment.Bound)
		} else {
			v -= inc.Delta
		}
		if j > i || out[i].Duplicate {
			vals = append(vals, v)
		}
	}
	return vals
}

// related lists, for a divergence's report, the batch's other items on
// the same counter or in the same transaction, with both outcomes.
func (d *diff) related(incs []shardcounter.Increment, mout, sout []shardcounter.Outcome, i int) string {
	var b strings.Builder
	for j, inc := range incs {
		if j != i && (inc.Counter == incs[i].Counter || (inc.Txn != 0 && inc.Txn == incs[i].Txn)) {
			fmt.Fprintf(&b, "\n\titem %d %s: model %s, store %s", j, d.incString(inc), outcomeString(mout[j]), outcomeString(sout[j]))
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "; the batch's other items on its counter or transaction:" + b.String()
}

// sameOutcome compares what the contract fixes of an outcome: the error's
// code, Duplicate, Unchanged, Skipped, and the total when both give one (and that
// the store gives none where none is due, and, when totals is set, every
// one that is).
func (d *diff) sameOutcome(m, s shardcounter.Outcome, totals bool) bool {
	switch {
	case shardcounter.ErrorCode(m.Err) != shardcounter.ErrorCode(s.Err), m.Duplicate != s.Duplicate, m.Unchanged != s.Unchanged, m.Skipped != s.Skipped:
		return false
	case !sameLimit(m.Limit, s.Limit):
		return false
	case (m.Applied == nil) != (s.Applied == nil) || (m.Applied != nil && *m.Applied != *s.Applied):
		return false
	case s.Total != nil:
		return m.Total != nil && *m.Total == *s.Total
	}
	return m.Total == nil || !totals
}

// isApprox reports whether id is an approx counter, whose totals (an
// estimate) no store with Options.Totals gives yet: only those it gives
// are checked.
func (d *diff) isApprox(id string) bool {
	c, err := d.model.GetCounter(ctx, id)
	return err == nil && c.Kind == shardcounter.KindApprox
}

// outcomeKind names an outcome's kind, for the run's tally.
func outcomeKind(o shardcounter.Outcome) string {
	switch {
	case o.Err != nil:
		return shardcounter.ErrorCode(o.Err)
	case o.Duplicate:
		return "duplicate"
	case o.Unchanged:
		return "unchanged"
	case o.Limit != nil && o.Limit.Allowed:
		return "allowed"
	case o.Limit != nil:
		return "refused"
	}
	return "applied"
}

func outcomeString(o shardcounter.Outcome) string {
	var parts []string
	switch {
	case o.Err != nil:
		parts = append(parts, "error "+shardcounter.ErrorCode(o.Err)+" ("+o.Err.Error()+")")
	case o.Duplicate:
		parts = append(parts, "duplicate")
	case o.Unchanged:
		parts = append(parts, "applied, unchanged")
	case o.Skipped:
		parts = append(parts, "skipped")
	default:
		parts = append(parts, "applied")
	}
	if o.Err != nil && (o.Duplicate || o.Unchanged) {
		parts = append(parts, fmt.Sprintf("duplicate %v unchanged %v", o.Duplicate, o.Unchanged))
	}
	if o.Total != nil {
		parts = append(parts, fmt.Sprintf("total %d", *o.Total))
	}
	if o.Limit != nil {
		parts = append(parts, fmt.Sprintf("limit %+v", *o.Limit))
	}
	if o.Applied != nil {
		parts = append(parts, fmt.Sprintf("applied %d", *o.Applied))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// incString writes an item briefly, its counter without the run's prefix.
func (d *diff) incString(inc shardcounter.Increment) string {
	s := fmt.Sprintf("{%q", strings.TrimPrefix(inc.Counter, d.p))
	if inc.Member != "" {
		s += fmt.Sprintf(" member %q", inc.Member)
	}
	if inc.Sketch != nil {
		n, _ := sketch.Count([][]byte{inc.Sketch})
		s += fmt.Sprintf(" sketch of %d bytes (~%d)", len(inc.Sketch), n)
	}
	s += fmt.Sprintf(" delta %d pick %d", inc.Delta, inc.Pick)
	if inc.RequestID != "" {
		s += fmt.Sprintf(" request id %q", inc.RequestID)
	}
	if inc.Kind != "" {
		s += " kind " + string(inc.Kind)
	}
	if inc.Create != nil {
		s += " create " + specString(*inc.Create)
	}
	if inc.Total {
		s += " total"
	}
	if inc.Txn != 0 {
		s += fmt.Sprintf(" txn %d", inc.Txn)
	}
	if inc.If != 0 {
		s += fmt.Sprintf(" if item %d", inc.If-1)
	}
	if b := inc.Bound; b != nil {
		s += fmt.Sprintf(" bound [%d, %d] saturate %v", b.Lower, b.Upper, b.Saturate)
	}
	if t := inc.Take; t != nil {
		s += fmt.Sprintf(" take %d of %s", t.Cost, t.Policy)
		if t.Peek {
			s += " peek"
		}
		if t.Remove {
			s += " remove if idle"
		}
	}
	return s + "}"
}

// check compares what both read after a batch: every counter's value and
// shard count (nil for a missing one), and, by kind, members and the
// shards they count, window buckets in retention, and approx shards'
// estimates (the dense counter's only when all is set).
func (d *diff) check(all bool) {
	d.t.Helper()
	mr, merr := d.model.ReadCounters(ctx, d.ids)
	sr, serr := d.store.ReadCounters(ctx, d.ids)
	if shardcounter.ErrorCode(merr) != shardcounter.ErrorCode(serr) {
		for _, id := range d.ids { // which counter, and what the last batch did to it
			_, merr := d.model.ReadCounter(ctx, id)
			if _, serr := d.store.ReadCounter(ctx, id); shardcounter.ErrorCode(merr) != shardcounter.ErrorCode(serr) {
				d.fail("after batch %d: ReadCounter(%s): model %v, store %v%s", d.batches, d.short(id), merr, serr, d.lastOn(id))
			}
		}
		d.fail("after batch %d: ReadCounters: model %v, store %v", d.batches, merr, serr)
	}
	for i, id := range d.ids {
		m, s := mr[i], sr[i]
		switch {
		case (m == nil) != (s == nil), m != nil && (m.Value != s.Value || m.Shards != s.Shards):
			d.fail("after batch %d: ReadCounters(%s): model %s, store %s%s", d.batches, d.short(id), readingString(m), readingString(s), d.lastOn(id))
		case m == nil:
			continue
		}
		c, err := d.model.GetCounter(ctx, id)
		if err != nil {
			d.t.Fatal(err)
		}
		switch {
		case c.Kind == shardcounter.KindDistinct:
			d.checkMembers(id)
		case c.Kind == shardcounter.KindApprox && (all || id != d.dense):
			d.checkSketches(id)
		case c.Window != nil:
			d.checkWindow(id, c.Window)
		}
	}
	d.checkKeys()
}

// batchRun is a batch and both stores' outcomes.
type batchRun struct {
	incs       []shardcounter.Increment
	mout, sout []shardcounter.Outcome
}

// lastOn lists, for a divergence's report, the last batch's items on id.
func (d *diff) lastOn(id string) string {
	var b strings.Builder
	for j, inc := range d.last.incs {
		if inc.Counter == id {
			fmt.Fprintf(&b, "\n\titem %d %s: model %s, store %s", j, d.incString(inc), outcomeString(d.last.mout[j]), outcomeString(d.last.sout[j]))
		}
	}
	_, mv, merr := d.model.ReadShards(ctx, id)
	_, sv, serr := d.store.ReadShards(ctx, id)
	shards := fmt.Sprintf("; shards: model %v (%v), store %v (%v)", mv, merr, sv, serr)
	if b.Len() == 0 {
		return shards + "; the last batch had no item on it"
	}
	return shards + "; the last batch's items on it:" + b.String()
}

func (d *diff) short(id string) string { return strings.TrimPrefix(id, d.p) }

func readingString(r *shardcounter.Reading) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("%d over %d shards", r.Value, r.Shards)
}

// checkMembers compares a distinct counter's members, one of them by
// IsMember, and its shards (each the count of its members on it).
func (d *diff) checkMembers(id string) {
	d.t.Helper()
	mm, merr := d.model.ListMembers(ctx, id, "", shardcounter.MaxListLimit)
	sm, serr := d.store.ListMembers(ctx, id, "", shardcounter.MaxListLimit)
	if merr != nil || serr != nil || !slices.Equal(mm, sm) {
		d.fail("after batch %d: ListMembers(%s): model %q (%v), store %q (%v)%s", d.batches, d.short(id), mm, merr, sm, serr, d.lastOn(id))
	}
	m := poolMember(d.crng)
	mi, merr := d.model.IsMember(ctx, id, m)
	si, serr := d.store.IsMember(ctx, id, m)
	if merr != nil || serr != nil || mi != si {
		d.fail("after batch %d: IsMember(%s, %q): model %v (%v), store %v (%v)", d.batches, d.short(id), m, mi, merr, si, serr)
	}
	_, mv, merr := d.model.ReadShards(ctx, id)
	_, sv, serr := d.store.ReadShards(ctx, id)
	if merr != nil || serr != nil || !slices.Equal(mv, sv) {
		d.fail("after batch %d: ReadShards(%s), members per shard: model %v (%v), store %v (%v)", d.batches, d.short(id), mv, merr, sv, serr)
	}
}

// checkSketches compares an approx counter's shards' estimates: each
// shard holds the members that hash to it and the sketches merged into it.
func (d *diff) checkSketches(id string) {
	d.t.Helper()
	estimates := func(s shardcounter.CounterStore) ([]int64, error) {
		_, shards, err := s.(shardcounter.SketchStore).ReadSketches(ctx, id)
		if err != nil {
			return nil, err
		}
		out := make([]int64, len(shards))
		for i, b := range shards {
			if out[i], err = sketch.Count([][]byte{b}); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	me, merr := estimates(d.model)
	se, serr := estimates(d.store)
	if merr != nil || serr != nil || !slices.Equal(me, se) {
		d.fail("after batch %d: ReadSketches(%s), each shard's estimate: model %v (%v), store %v (%v)%s", d.batches, d.short(id), me, merr, se, serr, d.lastOn(id))
	}
}

// checkWindow compares a windowed counter's buckets in retention (from
// the one holding now − retention on), which no store may have removed,
// as a series and as a sum.
func (d *diff) checkWindow(id string, w *shardcounter.Window) {
	d.t.Helper()
	now := d.clk.Now()
	from, to := w.BucketOf(now.Add(-time.Duration(w.Retention))), now.Add(time.Duration(w.Bucket))
	ms, merr := d.model.ReadSeries(ctx, id, from, to)
	ss, serr := d.store.ReadSeries(ctx, id, from, to)
	if merr != nil || serr != nil || seriesString(ms) != seriesString(ss) {
		d.fail("after batch %d: ReadSeries(%s, %s, %s): model %s (%v), store %s (%v)%s", d.batches, d.short(id), from.Format(time.DateTime), to.Format(time.DateTime), seriesString(ms), merr, seriesString(ss), serr, d.lastOn(id))
	}
	mw, merr := d.model.ReadWindow(ctx, id, from, to)
	sw, serr := d.store.ReadWindow(ctx, id, from, to)
	// A sum outside int64 is an error on both, compared by code.
	if shardcounter.ErrorCode(merr) != shardcounter.ErrorCode(serr) || (merr == nil && mw.Value != sw.Value) {
		d.fail("after batch %d: ReadWindow(%s, %s, %s): model %+v (%v), store %+v (%v)", d.batches, d.short(id), from.Format(time.DateTime), to.Format(time.DateTime), mw, merr, sw, serr)
	}
}

// checkList compares the run's counters as ListCounters gives them, with
// their specs: those created on write have the spec of the item that
// created them.
func (d *diff) checkList() {
	d.t.Helper()
	ml, merr := d.model.ListCounters(ctx, d.p, "", shardcounter.MaxListLimit)
	sl, serr := d.store.ListCounters(ctx, d.p, "", shardcounter.MaxListLimit)
	str := func(cs []*shardcounter.Counter) string {
		var parts []string
		for _, c := range cs {
			parts = append(parts, d.short(c.ID)+" "+specString(c.Spec))
		}
		return strings.Join(parts, "; ")
	}
	if merr != nil || serr != nil || str(ml) != str(sl) {
		d.fail("at the end: ListCounters: model %s (%v), store %s (%v)", str(ml), merr, str(sl), serr)
	}
}
