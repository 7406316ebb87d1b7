package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/collection"
)

// Defaults of CollectionsConfig.
const (
	DefaultCollectionDocuments = 100_000
	DefaultQueryClients        = 4
	DefaultQueryDuration       = 5 * time.Second
)

// DefaultCollectionShards are the shard counts of issue 6's measurements:
// 1 (the unsharded baseline: every document on one index range), the
// seed's 3, and 16.
var DefaultCollectionShards = []int{1, 3, 16}

// DefaultQueryLimits are the page sizes queries are timed with.
var DefaultQueryLimits = []int{5, 100}

// CollectionsConfig describes a benchmark of time-ordered collections on
// one store.
type CollectionsConfig struct {
	Store     shardcounter.CollectionStore
	StoreName string
	// Writers insert one document per call, stamped by the server's clock
	// (a monotonically increasing timestamp, the seed's hot index).
	// Default 64.
	Writers int
	// Duration of each insert run. Default 10s.
	Duration time.Duration
	// Shards: one collection per shard count. Default 1, 3, 16.
	Shards []int
	// Documents the collection is filled to before queries are timed.
	// Default 100,000.
	Documents int
	// QueryClients run queries at once, each for QueryDuration per limit.
	// Defaults 4 and 5s.
	QueryClients  int
	QueryDuration time.Duration
	// Limits are the page sizes timed. Default 5, 100.
	Limits []int
	// Maintain, when set, runs after each collection is filled, before its
	// queries are timed, and after it is deleted: the store's own upkeep,
	// such as PostgreSQL's VACUUM ANALYZE where autovacuum is off, so that
	// one shard count's run does not measure the previous one's leftovers
	// or statistics taken while the tables were empty.
	Maintain func(ctx context.Context) error
}

func (c CollectionsConfig) withDefaults() CollectionsConfig {
	if c.Writers == 0 {
		c.Writers = DefaultClients
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if len(c.Shards) == 0 {
		c.Shards = DefaultCollectionShards
	}
	if c.Documents == 0 {
		c.Documents = DefaultCollectionDocuments
	}
	if c.QueryClients == 0 {
		c.QueryClients = DefaultQueryClients
	}
	if c.QueryDuration == 0 {
		c.QueryDuration = DefaultQueryDuration
	}
	if len(c.Limits) == 0 {
		c.Limits = DefaultQueryLimits
	}
	return c
}

// CollectionRun is one measured run: an insert run (Limit 0) or a query
// run of one page size.
type CollectionRun struct {
	Store     string  `json:"store"`
	Phase     string  `json:"phase"` // "insert" or "query"
	Shards    int     `json:"shards"`
	Clients   int     `json:"clients"`
	Documents int     `json:"documents"` // in the collection when the run ended
	Limit     int     `json:"limit,omitempty"`
	Ops       int64   `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	Errors    int64   `json:"errors"`
	// ReadPerQuery is the documents the stores returned to the merge per
	// query, against MinRead = limit + n: the fewest that prove a page of
	// limit documents from n shards (one past the page on each shard).
	ReadPerQuery float64 `json:"read_per_query,omitempty"`
	MinRead      int     `json:"min_read,omitempty"`
}

// Collections measures insert throughput and query latency for each shard
// count, on a collection of its own per count (named after the run, so a
// shared database is not disturbed). Queries filter on an index holding a
// third of the documents, newest first, as the seed's queries do.
func Collections(ctx context.Context, cfg CollectionsConfig) ([]CollectionRun, error) {
	cfg = cfg.withDefaults()
	var runs []CollectionRun
	tag := time.Now().UTC().Format("20060102T150405")
	for _, n := range cfg.Shards {
		svc := collection.New(cfg.Store, collection.Config{})
		name := fmt.Sprintf("bench-%s-%d", tag, n)
		if _, err := svc.CreateCollection(ctx, name, shardcounter.CollectionOptions{Shards: n, Indexes: []string{"kind"}}); err != nil {
			return runs, err
		}
		var seq atomic.Int64
		doc := func() shardcounter.DocumentInput {
			i := seq.Add(1)
			return shardcounter.DocumentInput{Data: map[string]any{"kind": []string{"a", "b", "c"}[i%3], "seq": i}}
		}
		m, err := Measure(ctx, cfg.Writers, cfg.Duration, func(ctx context.Context) error {
			_, err := svc.PutDocuments(ctx, name, []shardcounter.DocumentInput{doc()})
			return err
		})
		if err != nil {
			return runs, err
		}
		runs = append(runs, CollectionRun{
			Store: cfg.StoreName, Phase: "insert", Shards: n, Clients: cfg.Writers, Documents: int(m.Ops),
			Ops: m.Ops, OpsPerSec: m.OpsPerSec(), P50ms: ms(m.Percentile(0.5)), P99ms: ms(m.Percentile(0.99)), Errors: m.Errors,
		})
		if err := fill(ctx, svc, name, cfg.Documents-int(m.Ops), doc); err != nil {
			return runs, err
		}
		if err := cfg.maintain(ctx); err != nil {
			return runs, err
		}
		total := max(cfg.Documents, int(m.Ops))
		for _, limit := range cfg.Limits {
			q := shardcounter.Query{Where: []shardcounter.Filter{{Field: "kind", Op: "==", Value: "a"}}, Limit: limit}
			queries0, read0 := svc.Stats().Queries.Load(), svc.Stats().DocumentsRead.Load()
			m, err := Measure(ctx, cfg.QueryClients, cfg.QueryDuration, func(ctx context.Context) error {
				_, err := svc.QueryDocuments(ctx, name, q)
				return err
			})
			if err != nil {
				return runs, err
			}
			r := CollectionRun{
				Store: cfg.StoreName, Phase: "query", Shards: n, Clients: cfg.QueryClients, Documents: total, Limit: limit,
				Ops: m.Ops, OpsPerSec: m.OpsPerSec(), P50ms: ms(m.Percentile(0.5)), P99ms: ms(m.Percentile(0.99)), Errors: m.Errors,
				MinRead: limit + n,
			}
			if queries := svc.Stats().Queries.Load() - queries0; queries > 0 {
				r.ReadPerQuery = float64(svc.Stats().DocumentsRead.Load()-read0) / float64(queries)
			}
			runs = append(runs, r)
		}
		if err := svc.DeleteCollection(ctx, name); err != nil {
			return runs, err
		}
		if err := cfg.maintain(ctx); err != nil {
			return runs, err
		}
	}
	return runs, nil
}

func (c CollectionsConfig) maintain(ctx context.Context) error {
	if c.Maintain == nil {
		return nil
	}
	if err := c.Maintain(ctx); err != nil {
		return fmt.Errorf("bench: store maintenance: %w", err)
	}
	return nil
}

// fill adds count documents in batches of MaxDocumentBatch from 8
// writers, to reach the query phase's size quickly.
func fill(ctx context.Context, svc *collection.Service, name string, count int, doc func() shardcounter.DocumentInput) error {
	var left atomic.Int64
	left.Store(int64(count))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				k := min(left.Add(-shardcounter.MaxDocumentBatch)+shardcounter.MaxDocumentBatch, shardcounter.MaxDocumentBatch)
				if k <= 0 {
					return
				}
				batch := make([]shardcounter.DocumentInput, k)
				for i := range batch {
					batch[i] = doc()
				}
				if _, err := svc.PutDocuments(ctx, name, batch); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// ReportCollections prints runs as a table on w and, when jsonPath is not
// empty, writes them to that file as JSON: what the stores' env-gated
// collection benchmarks print (SHARDCOUNTER_BENCH_JSON names the file).
func ReportCollections(w io.Writer, runs []CollectionRun, jsonPath string) error {
	if err := WriteCollectionsTable(w, runs); err != nil {
		return err
	}
	if jsonPath == "" {
		return nil
	}
	b, err := json.MarshalIndent(runs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(jsonPath, b, 0o644)
}

// WriteCollectionsTable prints runs as a table: inserts with their ratio
// to the first insert run, queries with documents read against the least
// possible.
func WriteCollectionsTable(w io.Writer, runs []CollectionRun) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tphase\tshards\tclients\tlimit\tdocs\tops/s\tvs first\tp50 ms\tp99 ms\terrors\tread/query\tlimit+n\t")
	var base float64
	for _, r := range runs {
		ratio, limit, read, minRead := "", "", "", ""
		if r.Phase == "insert" {
			if base == 0 {
				base = r.OpsPerSec
			}
			if base > 0 {
				ratio = fmt.Sprintf("%.2f×", r.OpsPerSec/base)
			}
		} else {
			limit, read, minRead = fmt.Sprint(r.Limit), fmt.Sprintf("%.1f", r.ReadPerQuery), fmt.Sprint(r.MinRead)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%d\t%.0f\t%s\t%.2f\t%.2f\t%d\t%s\t%s\t\n",
			r.Store, r.Phase, r.Shards, r.Clients, limit, r.Documents, r.OpsPerSec, ratio, r.P50ms, r.P99ms, r.Errors, read, minRead)
	}
	return tw.Flush()
}

// CollectionsConfigFromEnv reads the settings of a collections benchmark
// from SHARDCOUNTER_BENCH_WRITERS, _DURATION, _SHARDS (comma-separated),
// _DOCUMENTS, _QUERY_CLIENTS, _QUERY_DURATION and _LIMITS, leaving the
// defaults for those unset, so that the stores' benchmark tests and
// scripts/bench-collections.sh share one set of knobs.
func CollectionsConfigFromEnv(getenv func(string) string) (CollectionsConfig, error) {
	var c CollectionsConfig
	ints := func(name string, dst *[]int) error {
		v := getenv(name)
		if v == "" {
			return nil
		}
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("%s=%q: give whole numbers of at least 1, comma-separated", name, v)
			}
			*dst = append(*dst, n)
		}
		return nil
	}
	one := func(name string, dst *int) error {
		var l []int
		if err := ints(name, &l); err != nil || len(l) == 0 {
			return err
		}
		*dst = l[0]
		return nil
	}
	dur := func(name string, dst *time.Duration) error {
		v := getenv(name)
		if v == "" {
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s=%q: give a duration such as 10s", name, v)
		}
		*dst = d
		return nil
	}
	return c, errors.Join(
		one("SHARDCOUNTER_BENCH_WRITERS", &c.Writers),
		dur("SHARDCOUNTER_BENCH_DURATION", &c.Duration),
		ints("SHARDCOUNTER_BENCH_SHARDS", &c.Shards),
		one("SHARDCOUNTER_BENCH_DOCUMENTS", &c.Documents),
		one("SHARDCOUNTER_BENCH_QUERY_CLIENTS", &c.QueryClients),
		dur("SHARDCOUNTER_BENCH_QUERY_DURATION", &c.QueryDuration),
		ints("SHARDCOUNTER_BENCH_LIMITS", &c.Limits),
	)
}
