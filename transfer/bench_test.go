package transfer_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/pgtest"
	"github.com/shardcounter/shardcounter/transfer"
)

// TestBenchExportImport measures export and import of N counters of 16
// shards, a tenth of them distinct with 10 members each (the issue's
// targets use N = 1,000,000): N counters are written into Pebble, exported,
// imported into a fresh Pebble and into PostgreSQL, and exported from
// there. It runs only with SHARDCOUNTER_BENCH=1; N is
// SHARDCOUNTER_BENCH_ITEMS (default 100,000). It prints counters/s of each
// step; docs/EXPORT.md records a run.
func TestBenchExportImport(t *testing.T) {
	if os.Getenv("SHARDCOUNTER_BENCH") == "" {
		t.Skip("a measurement, not a test: run with SHARDCOUNTER_BENCH=1")
	}
	n := 100000
	if v := os.Getenv("SHARDCOUNTER_BENCH_ITEMS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	ctx := context.Background()
	dir := t.TempDir()
	src, err := transfer.OpenStore(ctx, "pebble:"+filepath.Join(dir, "src"), &transfer.Clock{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var incs []shardcounter.Increment
	flush := func() {
		if _, err := src.Apply(ctx, incs); err != nil {
			t.Fatal(err)
		}
		incs = incs[:0]
	}
	sum, distinct := &shardcounter.Spec{Shards: 16}, &shardcounter.Spec{Shards: 16, Kind: shardcounter.KindDistinct}
	for i := range n {
		id := fmt.Sprintf("c%08d", i)
		if i%10 == 0 {
			for m := range 10 {
				incs = append(incs, shardcounter.Increment{Counter: id, Member: "u" + strconv.Itoa(m), Delta: 1, Create: distinct})
			}
		} else {
			incs = append(incs, shardcounter.Increment{Counter: id, Delta: int64(i), Pick: uint64(i), Create: sum})
		}
		if len(incs) >= 1000 {
			flush()
		}
	}
	flush()
	step := func(name string, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		el := time.Since(start)
		fmt.Printf("%-28s %d counters in %v: %.0f counters/s\n", name, n, el.Round(time.Millisecond), float64(n)/el.Seconds())
	}
	var buf bytes.Buffer
	step("export pebble", func() error { _, err := transfer.Export(ctx, src, &buf, transfer.ExportOptions{}); return err })
	data := buf.Bytes()
	for _, dst := range []struct{ name, dsn string }{
		{"pebble", "pebble:" + filepath.Join(dir, "dst")},
		{"postgres", pgtest.MustDatabase(t)},
	} {
		clock := &transfer.Clock{}
		s, err := transfer.OpenStore(ctx, dst.dsn, clock)
		if err != nil {
			t.Fatal(err)
		}
		step("import "+dst.name, func() error {
			_, err := transfer.Import(ctx, s, bytes.NewReader(data), transfer.ImportOptions{Clock: clock})
			return err
		})
		var out bytes.Buffer
		step("export "+dst.name, func() error { _, err := transfer.Export(ctx, s, &out, transfer.ExportOptions{}); return err })
		if !bytes.Equal(out.Bytes(), data) {
			t.Errorf("%s: export differs from the source's", dst.name)
		}
		s.Close()
	}
}
