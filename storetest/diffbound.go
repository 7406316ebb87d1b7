package storetest

import (
	"math"

	"github.com/shardcounter/shardcounter"
)

// The differential test's bounded items (Increment.Bound, RESP's INCREX):
// deltas (0 now and then) on sum, bounded and windowed counters, under
// bounds near the counter's total, above or below it, one-sided,
// inverted (refused), saturating or not. The model applies the rule on
// unbounded integers; a store decides it on the counter's exact total
// (package decide); the applied deltas (Outcome.Applied) are compared
// with the rest of the outcomes.

// setupBounds probes whether the store takes bounded items: one that
// refuses them (shardcounter.ErrBoundsUnsupported) gets none.
func (d *diff) setupBounds() {
	b := shardcounter.Unbounded()
	out, err := d.store.Apply(ctx, []shardcounter.Increment{{Counter: d.p + "boundprobe", Delta: 1, Bound: &b}})
	if err != nil {
		d.t.Fatalf("a bounded item: %v", err)
	}
	if shardcounter.IsBoundsUnsupported(out[0].Err) {
		d.t.Logf("the store refuses bounded items (%v): the run sends none", out[0].Err)
		d.noBounds = true
	} else if shardcounter.ErrorCode(out[0].Err) != shardcounter.ENOTFOUND {
		d.t.Fatalf("a bounded item on a missing counter: %v, want not_found", out[0].Err)
	}
	// A store may keep bounds and still refuse an item conditional on
	// another (Increment.If; Redis): the run then sends none.
	out, err = d.store.Apply(ctx, []shardcounter.Increment{{Counter: d.p + "boundprobe", Delta: 1}, {Counter: d.p + "boundprobe", Delta: 1, If: 1}})
	if err != nil {
		d.t.Fatalf("a conditional item: %v", err)
	}
	if shardcounter.IsBoundsUnsupported(out[1].Err) {
		d.t.Logf("the store refuses conditional items (%v): the run sends none", out[1].Err)
		d.noIf = true
	}
}

// bound makes inc (a delta) a bounded item, with bounds around the
// counter's total as the model has it now.
func (d *diff) bound(inc *shardcounter.Increment) {
	var total int64
	if r, err := d.model.ReadCounter(ctx, inc.Counter); err == nil {
		total = r.Value
	}
	b := shardcounter.Unbounded()
	near := func() int64 {
		v, ok := total+d.rng.Int64N(21)-10, true
		if (total > 0 && v < total-20) || (total < 0 && v > total+20) {
			ok = false
		}
		if !ok {
			return total
		}
		return v
	}
	switch d.rng.IntN(6) {
	case 0:
		b.Upper = near()
	case 1:
		b.Lower = near()
	case 2, 3:
		b.Lower, b.Upper = near(), near()
		if b.Lower > b.Upper && d.rng.IntN(4) != 0 {
			b.Lower, b.Upper = b.Upper, b.Lower
		}
	case 4:
		b.Upper = math.MaxInt64 - d.rng.Int64N(5)
		b.Lower = math.MinInt64 + d.rng.Int64N(5)
	case 5:
		b.Lower, b.Upper = total, total
	}
	b.Saturate = d.rng.IntN(2) == 0
	inc.Bound = &b
	if d.rng.IntN(10) == 0 {
		inc.Delta = 0
	}
}
