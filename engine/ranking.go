package engine

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
)

// rankings are the engine's rankings: their definitions, loaded from the
// store (shardcounter.RankingStore) on first use and kept in step with
// it, and each one's top list (ranked). They observe the engine's
// commits (shardcounter.CommitObserver, rankcommit.go), and log what
// each changed on every ranking whose prefix its counters match: that is
// the whole cost of a ranking on the write path, one prefix test per
// ranking and item of a commit, and a delta logged for each item a
// ranking ranks.
type rankings struct {
	e   *Engine
	log *changeLog

	mu     sync.Mutex
	loaded time.Time // when the definitions were last read; zero: never
	byName map[string]*ranked
	// active is byName's values, for commits to read without a lock.
	active atomic.Pointer[[]*ranked]

	// The refresher: started with the first ranking, stopped by close.
	// started and closed are guarded by mu.
	started, closed bool
	stop, stopped   chan struct{}
}

func newRankings(e *Engine) *rankings {
	return &rankings{e: e, log: newChangeLog(), byName: make(map[string]*ranked), stop: make(chan struct{}), stopped: make(chan struct{})}
}

// publish makes byName's rankings those that commits see. r.mu is held.
func (r *rankings) publish() {
	all := make([]*ranked, 0, len(r.byName))
	for _, k := range r.byName {
		all = append(all, k)
	}
	r.active.Store(&all)
	if len(all) > 0 && !r.started && !r.closed {
		r.started = true
		go r.refresher()
	}
}

// load reads the definitions from the store the first time it is called
// (and, with Config.RankingRescan, again once reloadEvery has passed:
// other servers may have created or deleted some), and starts keeping
// those not kept yet.
func (r *rankings) load(ctx context.Context) error {
	r.mu.Lock()
	loaded := r.loaded
	r.mu.Unlock()
	if !loaded.IsZero() && (!r.e.cfg.RankingRescan || time.Since(loaded) < reloadEvery) {
		return nil
	}
	defs, err := r.e.store.ListRankings(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[string]bool, len(defs))
	for _, d := range defs {
		seen[d.Name] = true
		if k := r.byName[d.Name]; k == nil || k.def.CreatedAt != d.CreatedAt || !k.def.SameOptions(d.RankingOptions) {
			r.byName[d.Name] = newRanked(d, r.log)
		}
	}
	for name := range r.byName {
		if !seen[name] {
			delete(r.byName, name)
		}
	}
	r.loaded = time.Now()
	r.publish()
	return nil
}

// reloadEvery is how often, with Config.RankingRescan, the definitions
// are read again for rankings other servers created or deleted.
const reloadEvery = time.Second

// get returns the kept ranking of that name, or ErrNotFound.
func (r *rankings) get(ctx context.Context, name string) (*ranked, error) {
	if err := r.load(ctx); err != nil {
		return nil, err
	}
	r.mu.Lock()
	k := r.byName[name]
	r.mu.Unlock()
	if k == nil {
		return nil, shardcounter.RankingNotFound(name)
	}
	return k, nil
}

// refresher keeps every ranking's top list fresh in the background, so
// that reads seldom wait for a refresh: each is refreshed once half its
// staleness bound has passed since its as_of. It stops with the engine.
func (r *rankings) refresher() {
	defer close(r.stopped)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		p := r.active.Load()
		if p == nil {
			continue
		}
		for _, k := range *p {
			if k.due(r.e.cfg.Now(), time.Duration(k.def.MaxStaleness)/2) && k.refreshMu.TryLock() {
				ctx, cancel := context.WithTimeout(context.Background(), r.e.cfg.FlushTimeout)
				_ = k.refresh(ctx, r.e) // a failed refresh is tried again; reads see the error
				cancel()
				k.refreshMu.Unlock()
			}
		}
	}
}

// close stops the refresher and waits for it.
func (r *rankings) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	close(r.stop)
	if r.started {
		<-r.stopped
	}
}

var _ shardcounter.RankingService = (*Engine)(nil)

// CreateRanking records a ranking in the store and starts keeping it:
// the first read seeds it with a scan of the counters with its prefix.
func (e *Engine) CreateRanking(ctx context.Context, name string, opts shardcounter.RankingOptions) (*shardcounter.Ranking, bool, error) {
	if err := shardcounter.ValidateRanking(name, opts); err != nil {
		return nil, false, err
	}
	opts = opts.WithDefaults()
	if err := e.ranks.load(ctx); err != nil {
		return nil, false, err
	}
	e.ranks.mu.Lock()
	n, kept := len(e.ranks.byName), e.ranks.byName[name] != nil
	e.ranks.mu.Unlock()
	if n >= shardcounter.MaxRankings && !kept {
		return nil, false, shardcounter.Errorf(shardcounter.EEXHAUSTED, "the store holds %d rankings, the limit: delete one first", n)
	}
	def := &shardcounter.Ranking{Name: name, RankingOptions: opts, CreatedAt: e.cfg.Now().UTC().Truncate(time.Microsecond)}
	stored, created, err := e.store.CreateRanking(ctx, def)
	if err != nil {
		return nil, false, err
	}
	if !created && !stored.SameOptions(opts) {
		return nil, false, shardcounter.Errorf(shardcounter.EEXISTS, "ranking %q exists with other options (prefix %q, last %s, size %d, max_staleness %s): delete it first or choose another name",
			name, stored.Prefix, stored.Last, stored.Size, stored.MaxStaleness)
	}
	e.ranks.mu.Lock()
	if k := e.ranks.byName[name]; k == nil || k.def.CreatedAt != stored.CreatedAt {
		e.ranks.byName[name] = newRanked(stored, e.ranks.log)
		e.ranks.publish()
	}
	e.ranks.mu.Unlock()
	return stored, created, nil
}

// GetRanking returns a ranking's definition.
func (e *Engine) GetRanking(ctx context.Context, name string) (*shardcounter.Ranking, error) {
	k, err := e.ranks.get(ctx, name)
	if err != nil {
		return nil, err
	}
	d := *k.def
	return &d, nil
}

// ListRankings returns every ranking by name.
func (e *Engine) ListRankings(ctx context.Context) ([]*shardcounter.Ranking, error) {
	if err := e.ranks.load(ctx); err != nil {
		return nil, err
	}
	e.ranks.mu.Lock()
	out := make([]*shardcounter.Ranking, 0, len(e.ranks.byName))
	for _, k := range e.ranks.byName {
		d := *k.def
		out = append(out, &d)
	}
	e.ranks.mu.Unlock()
	slices.SortFunc(out, func(a, b *shardcounter.Ranking) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteRanking removes a ranking from the store and stops keeping it.
func (e *Engine) DeleteRanking(ctx context.Context, name string) error {
	if err := shardcounter.ValidateName("ranking name", name); err != nil {
		return err
	}
	err := e.store.DeleteRanking(ctx, name)
	if err == nil || shardcounter.ErrorCode(err) == shardcounter.ENOTFOUND {
		e.ranks.mu.Lock()
		delete(e.ranks.byName, name)
		e.ranks.publish()
		e.ranks.mu.Unlock()
	}
	return err
}

// Top returns the first k entries of a ranking, refreshed first when its
// last refresh is older than its staleness bound.
func (e *Engine) Top(ctx context.Context, name string, k int) (*shardcounter.TopList, error) {
	if err := shardcounter.ValidateName("ranking name", name); err != nil {
		return nil, err
	}
	if err := shardcounter.CheckTopK(k); err != nil {
		return nil, err
	}
	r, err := e.ranks.get(ctx, name)
	if err != nil {
		return nil, err
	}
	return r.readTop(ctx, e, k)
}
