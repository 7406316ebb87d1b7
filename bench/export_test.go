package bench

// Exports for the tests in package bench_test, which check how operations
// are drawn without a server.

// Draw is one operation as a client draws it.
type Draw struct {
	Read, ReadBatch bool
	Counter         int
	Delta           int64
	Member          int
	Counters        []int
}

// Draws returns n operations drawn by one client's generator for cfg.
func Draws(cfg Config, n int) []Draw {
	cfg = cfg.withDefaults()
	g := newGenerator(cfg, 0)
	out := make([]Draw, n)
	var op operation
	for i := range out {
		g.next(&op)
		out[i] = Draw{Read: op.kind == opRead, ReadBatch: op.kind == opReadBatch, Counter: op.counter,
			Delta: op.delta, Member: op.member, Counters: append([]int(nil), op.counters...)}
	}
	return out
}

// StatusField is statusField, for its parsing test.
var StatusField = statusField
