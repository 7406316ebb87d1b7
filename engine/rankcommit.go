package engine

import (
	"context"
	"sync"

	"github.com/shardcounter/shardcounter"
)

// The change log between commits and rankings.
//
// A ranking keeps each counter's value (or window buckets) itself and
// moves it by the deltas of the commits that changed it, so that a
// refresh reads from the store only what the deltas cannot tell: a
// counter it has not seen yet, one created, deleted, reset or expired,
// one whose commit's outcome is unknown, and, in a windowed ranking, one
// whose commit may have landed in either of two buckets.
//
// A delta and a store read must not both count one commit. So a read is
// registered before it starts: registering drops the deltas already
// logged for the counter (their commits ended before the read began, so
// it sees them), and marks the read tainted when a commit of the counter
// is in flight then or starts before the read ends (begin marks it). A
// tainted read gives a value of some moment during the read, as the
// store would (good for that refresh), but the deltas after it cannot be
// added to it: the counter is read again at the next refresh, and that
// read blocks the counter's commits until they have ended (a hot counter
// is written by every commit, so an unblocked read would be tainted
// every time).

// change is one commit's delta to one counter, with the engine's clock
// just before and after the store call (Unix ns): the commit's time is
// between, up to the stores' clock skew.
type change struct {
	delta  int64
	t0, t1 int64
}

// pending is what a ranking has heard of one counter since its last
// refresh: deltas, or that it must be read from the store.
type pending struct {
	changes []change
	read    bool
}

// readState is a registered store read of one counter.
type readState struct {
	tainted bool // a commit of the counter overlapped the read
	block   bool // commits of the counter wait until the read ends
}

// changeLog is the rankings' shared lock and in-flight count. Every
// ranked's pend and reading are guarded by mu.
type changeLog struct {
	mu       sync.Mutex
	cond     sync.Cond
	inflight map[string]int // commits of a ranked counter between begin and end
	waiters  int            // begins waiting on a blocking read
}

func newChangeLog() *changeLog {
	l := &changeLog{inflight: make(map[string]int)}
	l.cond.L = &l.mu
	return l
}

// The rankings are a shardcounter.CommitObserver of the engine: they
// hear of every commit around its store call, and of every create,
// delete, reset and reshard after it, expiry's deletions of expired names
// included. Nothing else on the write path calls them.
var _ shardcounter.CommitObserver = (*rankings)(nil)

// BeforeCommit begins a batch's part in the rankings (begin), and returns
// ctx with it for AfterCommit.
func (r *rankings) BeforeCommit(ctx context.Context, c *shardcounter.Commit) context.Context {
	if c.Op != shardcounter.CommitBatch {
		return ctx
	}
	rc := r.begin(c.Incs)
	if rc == nil {
		return ctx
	}
	rc.c = c
	return context.WithValue(ctx, rankCommitKey{}, rc)
}

// AfterCommit logs what a batch did (end), or marks the counter another
// commit changed to be read from the store: a create, delete, reset or
// reshard is no delta a ranking can add.
func (r *rankings) AfterCommit(ctx context.Context, c *shardcounter.Commit) {
	switch c.Op {
	case shardcounter.CommitBatch:
		// A store call observed within this one's (expiry's deletions)
		// has the context BeforeCommit returned: the key holds c.
		if rc, _ := ctx.Value(rankCommitKey{}).(*rankCommit); rc != nil && rc.c == c {
			r.end(rc, c)
		}
	case shardcounter.CommitCreate:
		if c.Err == nil {
			r.changed(c.Counter)
		}
	default:
		r.changed(c.Counter)
	}
}

type rankCommitKey struct{}

// rankCommit is one store call's part in the rankings: for each ranking,
// the increments whose counter it ranks.
type rankCommit struct {
	c     *shardcounter.Commit
	parts []rankPart
}

type rankPart struct {
	k   *ranked
	idx []int // into the commit's increments
}

// begin tells the rankings that incs are about to be committed, and
// returns what end needs. It waits while a blocking read of one of their
// counters runs. Engines in RankingRescan mode log nothing: each refresh
// reads every counter.
func (r *rankings) begin(incs []shardcounter.Increment) *rankCommit {
	p := r.active.Load()
	if p == nil || len(*p) == 0 || r.e.cfg.RankingRescan {
		return nil
	}
	var rc *rankCommit
	for _, k := range *p {
		var idx []int
		for i := range incs {
			if k.def.Matches(incs[i].Counter) {
				idx = append(idx, i)
			}
		}
		if len(idx) > 0 {
			if rc == nil {
				rc = &rankCommit{}
			}
			rc.parts = append(rc.parts, rankPart{k: k, idx: idx})
		}
	}
	if rc == nil {
		return nil
	}
	l := r.log
	l.mu.Lock()
	for rc.blocked(incs) {
		l.waiters++
		l.cond.Wait()
		l.waiters--
	}
	for _, pt := range rc.parts {
		for _, i := range pt.idx {
			id := incs[i].Counter
			l.inflight[id]++
			if st := pt.k.reading[id]; st != nil {
				st.tainted = true
			}
		}
	}
	l.mu.Unlock()
	return rc
}

// blocked reports whether a counter of the commit has a blocking read
// running. The log's lock is held.
func (rc *rankCommit) blocked(incs []shardcounter.Increment) bool {
	for _, pt := range rc.parts {
		if len(pt.k.reading) == 0 {
			continue
		}
		for _, i := range pt.idx {
			if st := pt.k.reading[incs[i].Counter]; st != nil && st.block {
				return true
			}
		}
	}
	return false
}

// end logs what the store call begun by begin did: a delta for each item
// applied, with the engine's clock before and after the call, a read for
// each whose outcome is unknown. It runs before the commit's writers are
// answered (shardcounter.CommitObserver), so a refresh that starts after
// a write was acknowledged counts it.
func (r *rankings) end(rc *rankCommit, c *shardcounter.Commit) {
	t0, t1 := c.Start.UnixNano(), c.End.UnixNano()
	l := r.log
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, pt := range rc.parts {
		for _, i := range pt.idx {
			inc, o := &c.Incs[i], c.Outcomes[i]
			id := inc.Counter
			if l.inflight[id]--; l.inflight[id] <= 0 {
				delete(l.inflight, id)
			}
			switch {
			case o.Err != nil:
				if shardcounter.IsOutcomeUnknown(o.Err) {
					pt.k.pendingOf(id).read = true
				}
			case o.Duplicate, o.Unchanged:
			case !exactDelta(*inc):
				pt.k.pendingOf(id).read = true
			default:
				p := pt.k.pendingOf(id)
				if !p.read {
					p.changes = append(p.changes, change{delta: inc.Delta, t0: t0, t1: t1})
				}
			}
		}
	}
	l.cond.Broadcast() // a blocking read may wait for these to end
}

// exactDelta reports whether an applied item moved its counter's value by
// exactly its Delta: a sum delta, or a member of a distinct counter. An add
// to an approx counter moves its estimate by what no item says, and a
// member item of no stated kind may be one.
func exactDelta(inc shardcounter.Increment) bool {
	switch {
	case inc.Sketch != nil:
		return false
	case inc.Member != "":
		return inc.Kind == shardcounter.KindDistinct
	}
	return true
}

// changed marks id, on every ranking it belongs to, to be read from the
// store at the next refresh: it was created, deleted, reset, resharded or
// merged into, which no delta describes.
func (r *rankings) changed(id string) {
	p := r.active.Load()
	if p == nil {
		return
	}
	l := r.log
	l.mu.Lock()
	for _, k := range *p {
		if k.def.Matches(id) {
			k.pendingOf(id).read = true
		}
	}
	l.mu.Unlock()
}

// pendingOf returns id's pending entry, made if missing. The log's lock
// is held.
func (k *ranked) pendingOf(id string) *pending {
	p := k.pend[id]
	if p == nil {
		p = &pending{}
		k.pend[id] = p
	}
	return p
}

// takePending returns what was logged since the last call and starts a
// new log.
func (k *ranked) takePending() map[string]*pending {
	k.log.mu.Lock()
	defer k.log.mu.Unlock()
	p := k.pend
	k.pend = make(map[string]*pending)
	return p
}

// register records reads of ids about to start (see the top of this
// file). With block, it waits until no commit of theirs is in flight,
// and holds new ones back until unregister.
func (k *ranked) register(ids []string, block bool) {
	l := k.log
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		delete(k.pend, id)
		k.reading[id] = &readState{tainted: l.inflight[id] > 0 && !block, block: block}
	}
	if !block {
		return
	}
	for _, id := range ids {
		for l.inflight[id] > 0 {
			l.cond.Wait()
		}
		delete(k.pend, id) // the commits waited for ended before the read
	}
}

// unregister ends the reads of ids and returns those that were tainted.
func (k *ranked) unregister(ids []string) []string {
	l := k.log
	l.mu.Lock()
	defer l.mu.Unlock()
	var tainted []string
	blocked := false
	for _, id := range ids {
		st := k.reading[id]
		delete(k.reading, id)
		if st == nil {
			continue
		}
		blocked = blocked || st.block
		if st.tainted {
			tainted = append(tainted, id)
		}
	}
	if blocked && l.waiters > 0 {
		l.cond.Broadcast()
	}
	return tainted
}
