package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
)

// The sweeper removes the idle states of rate limit keys, so that a limit
// keyed by user or address does not keep a counter for every key it ever
// saw. The engine remembers, bounded, each key's state counter it took
// from (a take of a defined limit, or CL.THROTTLE's), with the time the
// take's answer says the state becomes idle (now plus its reset after);
// every LimitSweepInterval it sends the removals of the states due
// (shardcounter.LimitTake.Remove) as writes of the group commit. The store
// decides each from the state it reads in that commit (package decide):
// a state taken from meanwhile, here or on another server sharing the
// store, is not idle and stays, and a take never races the removal.
//
// A removal that keeps its state (not idle by the store's clock, which
// may be behind this server's) is sent again at the next passes, up to
// sweepTries times, then forgotten: a key taken again is remembered
// afresh, on the server that took it. A server that restarts forgets its
// keys: a state it left stays until some server takes from the key again
// and sees it idle. Past maxSweepKeys remembered keys, new ones are not
// remembered (their states stay, as that of a key no one takes again).

const (
	// DefaultLimitSweepInterval is Config.LimitSweepInterval's default.
	DefaultLimitSweepInterval = 5 * time.Second
	// maxSweepKeys bounds the keys the sweeper remembers.
	maxSweepKeys = 1 << 18
	// maxSweepBatch bounds the removals one pass sends.
	maxSweepBatch = 4096
	// sweepTries is how many passes send a key's removal before it is
	// forgotten while its state stays.
	sweepTries = 3
)

// sweeper is the engine's list of limit keys to remove once idle.
type sweeper struct {
	mu   sync.Mutex
	keys map[string]sweepKey // state counter id → its removal
	off  atomic.Bool         // the store refuses removals: nothing is remembered
	once sync.Once           // closes stop
	stop chan struct{}
	done chan struct{}
}

// sweepKey is a remembered key: its policy, when its state is idle, and
// how many removals kept it.
type sweepKey struct {
	policy shardcounter.LimitPolicy
	idle   time.Time
	tries  int
}

// note remembers a take of state counter id under policy p, decided r at
// now: the state is idle once r's reset after has passed, and its removal
// waits at least hold more (a take's request id lives as long as the
// dedupe window, and goes with the state: removed earlier, a retry of the
// take would be decided, and charged, again). A key remembered already
// keeps the later of the two times.
func (s *sweeper) note(id string, p shardcounter.LimitPolicy, r *shardcounter.LimitResult, now time.Time, hold time.Duration) {
	if s == nil || s.off.Load() {
		return
	}
	idle := now.Add(max(time.Duration(r.ResetAfterMS)*time.Millisecond, hold))
	s.mu.Lock()
	if k, ok := s.keys[id]; ok || len(s.keys) < maxSweepKeys {
		if !ok || k.policy != p || idle.After(k.idle) {
			k.idle = idle
		}
		k.policy, k.tries = p, 0
		s.keys[id] = k
	}
	s.mu.Unlock()
}

// due takes out of the list up to maxSweepBatch keys idle at now.
func (s *sweeper) due(now time.Time) (ids []string, keys []sweepKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, k := range s.keys {
		if len(ids) == maxSweepBatch {
			break
		}
		if !k.idle.After(now) {
			ids, keys = append(ids, id), append(keys, k)
			delete(s.keys, id)
		}
	}
	return ids, keys
}

// keep puts back a key whose removal kept its state, to be sent again
// at the next pass, unless a take remembered it again meanwhile or it
// has been tried enough.
func (s *sweeper) keep(id string, k sweepKey) {
	if k.tries++; k.tries >= sweepTries {
		return
	}
	s.mu.Lock()
	if _, ok := s.keys[id]; !ok && len(s.keys) < maxSweepKeys {
		s.keys[id] = k
	}
	s.mu.Unlock()
}

// noteTake remembers the state of a take the store decided (g's, with
// outcome o), unless it was a peek, a removal or a retry.
func (e *Engine) noteTake(g *group, o shardcounter.Outcome) {
	if t := g.inc.Take; t != nil && !t.Peek && !t.Remove && !o.Duplicate && o.Limit != nil {
		var hold time.Duration
		if g.inc.RequestID != "" {
			hold = e.cfg.DedupeWindow
		}
		e.sweep.note(g.inc.Counter, t.Policy, o.Limit, e.cfg.Now(), hold)
	}
}

// startSweep starts the sweeper's passes, every interval.
func (e *Engine) startSweep(interval time.Duration) {
	s := &sweeper{keys: make(map[string]sweepKey), stop: make(chan struct{}), done: make(chan struct{})}
	e.sweep = s
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), e.cfg.FlushTimeout)
				if _, err := e.SweepLimits(ctx); err != nil {
					e.cfg.Logger.Warn("removing idle limit states failed; they are tried again", "error", err)
				}
				cancel()
			}
		}
	}()
}

// stopSweep stops the sweeper's passes and waits for the one running;
// Close may call it more than once.
func (e *Engine) stopSweep() {
	if s := e.sweep; s != nil {
		s.once.Do(func() { close(s.stop) })
		<-s.done
	}
}

// SweepLimits sends now the removals of the idle states of the limit keys
// this engine remembers taking from, through the group commit, and
// returns how many states the store removed. The engine runs it every
// Config.LimitSweepInterval; a state not idle by the store's clock stays.
// A store that does not decide removals (Redis, Redis Cluster) refuses
// the first, and the engine then stops remembering keys.
func (e *Engine) SweepLimits(ctx context.Context) (int, error) {
	s := e.sweep
	if s == nil || s.off.Load() {
		return 0, nil
	}
	ids, keys := s.due(e.cfg.Now())
	if len(ids) == 0 {
		return 0, nil
	}
	ws := make([]shardcounter.Write, len(ids))
	for i, id := range ids {
		ws[i] = shardcounter.Write{Counter: id, Take: &shardcounter.LimitTake{Policy: keys[i].policy, Remove: true}}
	}
	res, err := e.WriteBatch(ctx, ws)
	if err != nil {
		for i, id := range ids {
			s.keep(id, keys[i])
		}
		return 0, err
	}
	removed := 0
	for i, r := range res {
		switch {
		case r.Error != nil && shardcounter.IsRemoveUnsupported(r.Error):
			e.cfg.Logger.Info("the store does not remove idle limit states: they stay, and the engine stops sending their removals", "error", r.Error)
			s.off.Store(true)
			s.mu.Lock()
			clear(s.keys)
			s.mu.Unlock()
			return removed, nil
		case r.Removed:
			removed++
		default:
			s.keep(ids[i], keys[i])
		}
	}
	e.stats.LimitStatesRemoved.Add(int64(removed))
	return removed, nil
}
