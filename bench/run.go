package bench

// Run is the result of one run, with the JSON fields of SPEC.md and the
// workload that produced it.
type Run struct {
	Name      string  `json:"name"`
	Store     string  `json:"store"`
	Path      string  `json:"path"`           // naive, engine, http, resp or peer
	Peer      string  `json:"peer,omitempty"` // for path peer: redis-incr, postgres-update, http-bare, ...
	Shards    int     `json:"shards"`         // 0 for peers, which have none
	Clients   int     `json:"clients"`
	Counters  int     `json:"counters"`
	Zipf      float64 `json:"zipf,omitempty"`
	Workload  string  `json:"workload,omitempty"`   // single or timeline
	ReadRatio float64 `json:"read_ratio,omitempty"` // of operations that read
	// ReadBatch is the counters of each timeline read.
	ReadBatch int `json:"read_batch,omitempty"`
	// ReadConsistency is the reads' consistency when there are reads.
	ReadConsistency string `json:"read_consistency,omitempty"`
	// Kind is the counters' kind; Members the population of a distinct
	// counter's members; DecrRatio the fraction of writes that subtract.
	Kind      string  `json:"kind,omitempty"`
	Members   int     `json:"members,omitempty"`
	DecrRatio float64 `json:"decr_ratio,omitempty"`
	// Variant names how the path's counters were created: plain,
	// min=0, window=1m:1d...
	Variant string `json:"variant,omitempty"`
	// Pipeline is the commands per round trip when above 1.
	Pipeline  int     `json:"pipeline,omitempty"`
	DurationS float64 `json:"duration_s"` // measured, from the start to the last answer
	Ops       int64   `json:"ops"`        // answered operations: writes, reads and refused writes
	Writes    int64   `json:"writes"`     // acknowledged writes
	Reads     int64   `json:"reads"`      // answered reads (a timeline read counts once)
	// Refused counts writes a bounded counter refused (out_of_range), as
	// it must: answered, not errors.
	Refused   int64   `json:"refused,omitempty"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50MS     float64 `json:"p50_ms"` // latency of a round trip that was answered
	P99MS     float64 `json:"p99_ms"`
	Errors    int64   `json:"errors"`   // failed operations
	Verified  bool    `json:"verified"` // the values read back equal what the acknowledged writes add up to
	// Touched is how many counters the run wrote (or prefilled).
	Touched int64 `json:"counters_touched,omitempty"`
	// Settings are the store's or peer's settings that bound its
	// throughput, such as appendfsync or synchronous_commit.
	Settings map[string]string `json:"settings,omitempty"`
	// Engine path only: the engine's MaxInFlight when the run chose one,
	// and how many writes its store commits carried on average.
	MaxInFlight     int     `json:"max_in_flight,omitempty"`
	WritesPerCommit float64 `json:"writes_per_commit,omitempty"`
	// ShardCommits is how many shard documents (entities) the store
	// committed during the load, a commit that wrote k of them counting
	// k, on a document store (Firestore, Datastore) that the run writes
	// in process; ShardCommitsPerWrite is that per acknowledged write:
	// the figure the service bills and that a document's one write a
	// second limits. 1.0 is the seed's way, one commit an increment.
	ShardCommits         int64   `json:"shard_commits,omitempty"`
	ShardCommitsPerWrite float64 `json:"shard_commits_per_write,omitempty"`
	// Memory is the resident memory of the process serving the run,
	// when it could be read.
	Memory *Memory `json:"memory,omitempty"`
}

// Memory is the resident set size of the process that served a run:
// before the load (and the prefill), the most seen while it ran, and
// after it, before the counters are read back.
type Memory struct {
	Process   string `json:"process"` // "bench" (served in process), "server" or "redis"
	RSSBefore int64  `json:"rss_before_bytes"`
	RSSMax    int64  `json:"rss_max_bytes"`
	// RSSMaxAnon is the part of RSSMax the process allocated (anonymous
	// pages: what would have to be swapped), and RSSMaxFiles the part that
	// maps files (the executable, bbolt's database file: page cache the
	// kernel can drop, see fileProbe), when the serving process says:
	// in-process runs on Linux.
	RSSMaxAnon  *int64 `json:"rss_max_anon_bytes,omitempty"`
	RSSMaxFiles *int64 `json:"rss_max_files_bytes,omitempty"`
	// RSSPeak is the process's own high-water mark of resident memory
	// over the run (VmHWM, reset as the run starts, before the prefill),
	// which sees a peak that falls between two samples; 0 where there is
	// none (in-process runs on Linux have one). The kernel does not split
	// it into anonymous memory and files.
	RSSPeak     int64  `json:"rss_peak_bytes,omitempty"`
	RSSAfter    int64  `json:"rss_after_bytes"`
	SampleEvery string `json:"sample_every"` // how often RSSMax was sampled
}
