package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// DocumentStore is what a store on a document database (Firestore,
// Datastore) counts for /metrics: the batches it tried again after
// another writer came first or the database aborted them for contention,
// and each commit of a shard document.
type DocumentStore interface {
	// Conflicts returns the batches tried again so far.
	Conflicts() int64
	// OnShardCommit sets the function the store calls with each shard
	// document a committed batch wrote.
	OnShardCommit(func(counter string, shard int))
}

// maxDocumentSeries bounds the per-document series: the first documents
// committed get one each; the commits of the others are counted together
// under counter="_other", so a store of millions of counters cannot blow
// up the scrape.
const maxDocumentSeries = 1000

// RegisterDocumentStore exports a document store's counts:
// shardcounter_store_conflicts_total and
// shardcounter_store_shard_document_commits_total{counter,shard}, the
// per-document commit counter that shows the pacing of
// --shard-write-interval (its rate over any window stays at or below one
// per interval per document).
func (m *Metrics) RegisterDocumentStore(s DocumentStore) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "store", Name: "conflicts_total",
		Help: "Store batches committed again because another writer changed what they read, or the database aborted them for contention (ABORTED); nothing of a conflicting attempt was applied.",
	}, func() float64 { return float64(s.Conflicts()) }))
	commits := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "store", Name: "shard_document_commits_total",
		Help: "Commits of each shard document, by counter id and shard, for the first 1000 documents committed; the rest are counted under counter=\"_other\".",
	}, []string{"counter", "shard"})
	m.reg.MustRegister(commits)
	var mu sync.Mutex
	series := make(map[string]map[int]prometheus.Counter)
	n := 0
	other := commits.WithLabelValues("_other", "")
	s.OnShardCommit(func(counter string, shard int) {
		mu.Lock()
		defer mu.Unlock()
		c := series[counter][shard]
		if c == nil {
			if n >= maxDocumentSeries {
				other.Inc()
				return
			}
			if series[counter] == nil {
				series[counter] = make(map[int]prometheus.Counter)
			}
			c = commits.WithLabelValues(counter, strconv.Itoa(shard))
			series[counter][shard] = c
			n++
		}
		c.Inc()
	})
}
