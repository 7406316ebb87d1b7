package bench

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/shardcounter/shardcounter"
)

// Workloads, as Config.Workload and a run's "workload" name them.
const (
	// WorkloadSingle: each operation writes one counter or, with
	// Config.ReadRatio, reads one.
	WorkloadSingle = "single"
	// WorkloadTimeline: each operation is, with probability
	// Config.ReadRatio, a batch read of Config.ReadBatch counters (a
	// timeline showing the likes of its posts), or else a write to one.
	WorkloadTimeline = "timeline"
)

// Defaults of the workload.
const (
	// DefaultReadBatch is the counters a timeline read asks for at once:
	// about what one screen of posts shows.
	DefaultReadBatch = 20
	// DefaultTimelineReadRatio is the CLI's --read-ratio for a timeline:
	// most people scroll, few like.
	DefaultTimelineReadRatio = 0.9
	// DefaultMembers is the population members of distinct counters are
	// drawn from: small enough that a run of some seconds re-adds members
	// already present, as a doubled tap does.
	DefaultMembers = 100_000
)

// VariantPlain is the name of the sum counter variant with no bounds and
// no window.
const VariantPlain = "plain"

// Variant is how the counters of a run are made beyond their shard count:
// their kind, and for sum counters bounds (Min, Max) or a window. Paths
// runs each path once per variant, so that one report compares them; the
// writes of a run are those of its variant's kind.
type Variant struct {
	Name     string            // "plain", "distinct", or what sets it apart: "min=0", "window=1m:1d"
	Kind     shardcounter.Kind // "" is sum
	Min, Max *int64
	Window   *shardcounter.Window
}

// Plain is the sum counter variant with no bounds and no window.
func Plain() Variant { return Variant{Name: VariantPlain} }

// Distinct is the variant of distinct counters.
func Distinct() Variant {
	return Variant{Name: string(shardcounter.KindDistinct), Kind: shardcounter.KindDistinct}
}

// Bounded returns the variant bounded by min and max (either may be nil).
func Bounded(min, max *int64) Variant {
	v := Variant{Min: min, Max: max}
	switch {
	case min != nil && max != nil:
		v.Name = fmt.Sprintf("min=%d,max=%d", *min, *max)
	case min != nil:
		v.Name = fmt.Sprintf("min=%d", *min)
	default:
		v.Name = fmt.Sprintf("max=%d", *max)
	}
	return v
}

// Windowed returns the variant that counts in time buckets.
func Windowed(w shardcounter.Window) Variant {
	return Variant{Name: fmt.Sprintf("window=%s:%s", w.Bucket, w.Retention), Window: &w}
}

// kind is the variant's counter kind.
func (v Variant) kind() shardcounter.Kind {
	if v.Kind == "" {
		return shardcounter.KindSum
	}
	return v.Kind
}

// spec returns the spec the run's counters are created with.
func (v Variant) spec(shards int) shardcounter.Spec {
	return shardcounter.Spec{Shards: shards, Kind: v.kind(), Min: v.Min, Max: v.Max, Window: v.Window}
}

// opKind says what an operation does.
type opKind uint8

const (
	opWrite     opKind = iota // a write to one counter
	opRead                    // a read of one counter
	opReadBatch               // a batch read of several
)

// operation is one operation of a workload, as a client draws it, and,
// once a target has performed it, its result.
type operation struct {
	kind     opKind
	counter  int   // opWrite and opRead: the counter's number
	delta    int64 // opWrite: +1 or −1; on a distinct counter, add or remove
	member   int   // opWrite on a distinct counter: the member's number
	counters []int // opReadBatch: distinct counter numbers

	// changed is set by the target on a write that applied and changed
	// the value: every applied sum write, a member write that changed
	// membership. err is the operation's error.
	changed bool
	err     error
}

// memberName is the member a distinct write adds or removes.
func memberName(m int) string { return "m" + strconv.Itoa(m) }

// generator draws a client's operations. Each client has its own, since a
// Zipf generator is not safe for concurrent use and a shared one would be
// a lock on the hot path.
type generator struct {
	cfg  Config
	r    *rand.Rand
	pick func() int
}

func newGenerator(cfg Config, client int) *generator {
	r := rand.New(rand.NewPCG(rand.Uint64(), uint64(client)))
	g := &generator{cfg: cfg, r: r, pick: func() int { return 0 }}
	switch {
	case cfg.Counters > 1 && cfg.Zipf > 1:
		z := rand.NewZipf(r, cfg.Zipf, 1, uint64(cfg.Counters-1))
		g.pick = func() int { return int(z.Uint64()) }
	case cfg.Counters > 1:
		g.pick = func() int { return r.IntN(cfg.Counters) }
	}
	return g
}

// next fills op with the next operation, reusing its counters slice.
func (g *generator) next(op *operation) {
	batch := op.counters[:0]
	*op = operation{}
	if g.cfg.ReadRatio > 0 && g.r.Float64() < g.cfg.ReadRatio {
		if g.cfg.Workload != WorkloadTimeline {
			op.kind, op.counter = opRead, g.pick()
			return
		}
		op.kind, op.counters = opReadBatch, g.distinct(batch, min(g.cfg.ReadBatch, g.cfg.Counters))
		return
	}
	op.kind, op.counter, op.delta = opWrite, g.pick(), 1
	if g.cfg.DecrRatio > 0 && g.r.Float64() < g.cfg.DecrRatio {
		op.delta = -1
	}
	if g.cfg.Kind == shardcounter.KindDistinct {
		op.member = g.r.IntN(g.cfg.Members)
	}
}

// distinct appends n different counters to dst, drawn as writes draw
// them: a timeline shows each post once, and popular posts more often.
// When a steep skew over few counters keeps drawing the same ones, the
// rest are drawn uniformly.
func (g *generator) distinct(dst []int, n int) []int {
	for tries := 0; len(dst) < n; tries++ {
		i := g.pick()
		if tries > 64*n {
			i = g.r.IntN(g.cfg.Counters)
		}
		dup := false
		for _, j := range dst {
			if j == i {
				dup = true
				break
			}
		}
		if !dup {
			dst = append(dst, i)
		}
	}
	return dst
}
