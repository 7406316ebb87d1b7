package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
)

// Waiting for replicas.
//
// Redis replicates asynchronously: a master acknowledges a write before
// its replicas have it, and a failover to a replica that lacked it loses
// it. With Options.WaitReplicas (DSN wait_replicas=N) every write is
// acknowledged only once N replicas of each master it wrote confirm it:
// the store sends WAIT N T to each master after its writes, on the same
// connection (WAIT waits for the connection's own last write). Group
// commit makes this cheap: a batch costs one WAIT per master it wrote, in
// the pipeline that carries its scripts. A WAIT that falls short (fewer
// replicas within T) makes the writes it covered outcome unknown: they
// are on the master, and may or may not survive its failover.
//
// Writes outside batches — creating, resharding, deleting counters and
// collections, putting documents — end with a sync point per master they
// touched: a small write of a key of the master's own (SET prefix{tag}sync
// PX 60000) and WAIT, in one pipeline. The small write moves the
// connection's replication offset past everything the master had done
// before it, so the WAIT covers the earlier writes whatever connection
// sent them.

// syncTTL is how long a sync point's key lives: it only exists to be
// written.
const syncTTL = time.Minute

// node returns the client of the server, or of the master of the cluster,
// that serves key. Its pipelines use one connection, as WAIT needs.
func (s *CounterStore) node(ctx context.Context, key string) (*goredis.Client, error) {
	if s.cluster == nil {
		return s.single, nil
	}
	return s.cluster.MasterForKey(ctx, key)
}

// refresh makes the cluster client reload its slot map when err says it
// may be stale: a master that cannot be reached (its replica may have
// taken over) or a redirect. The reload runs in the background, at most
// one at a time.
func (s *CounterStore) refresh(ctx context.Context, err error) {
	if s.cluster != nil && err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		s.cluster.ReloadState(ctx)
	}
}

// waited checks the reply of a WAIT: nil when enough replicas confirmed,
// else the OutcomeUnknown error of the writes it covered.
func (s *CounterStore) waited(c *goredis.Cmd, node string) error {
	n, err := c.Int64()
	if err != nil {
		return outcomeUnknown("wait for replicas", fmt.Errorf("%s: %w", node, err))
	}
	if n < int64(s.waitReplicas) {
		return &shardcounter.Error{Code: shardcounter.EOUTCOMEUNKNOWN, OutcomeUnknown: true, Message: fmt.Sprintf(
			"redis: %d of %d replicas of %s confirmed the write within %v; it is on the master and may be lost if the master fails",
			n, s.waitReplicas, node, s.waitTimeout) + shardcounter.OutcomeUnknownCure}
	}
	return nil
}

// sync is a sync point (see above) on every master that serves one of
// keys, run concurrently. It does nothing without WaitReplicas.
func (s *CounterStore) sync(ctx context.Context, keys ...string) error {
	if s.waitReplicas == 0 || len(keys) == 0 {
		return nil
	}
	type point struct {
		node *goredis.Client
		key  string // a sync key on that node
	}
	var points []point
	seen := make(map[*goredis.Client]bool)
	for _, k := range keys {
		n, err := s.node(ctx, k)
		if err != nil {
			return storeErr("wait for replicas", err, true)
		}
		if !seen[n] {
			seen[n] = true
			points = append(points, point{n, s.prefix + "{" + slotTags()[KeySlot(k)] + "}sync"})
		}
	}
	errs := make([]error, len(points))
	var wg sync.WaitGroup
	for i, p := range points {
		wg.Go(func() {
			var w *goredis.Cmd
			_, err := p.node.Pipelined(ctx, func(pl goredis.Pipeliner) error {
				pl.Set(ctx, p.key, 1, syncTTL)
				w = s.wait(ctx, pl)
				return nil
			})
			if err != nil && w.Err() == nil {
				w.SetErr(err)
			}
			errs[i] = s.waited(w, p.node.Options().Addr)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// wait queues WAIT WaitReplicas WaitTimeout on p.
func (s *CounterStore) wait(ctx context.Context, p goredis.Pipeliner) *goredis.Cmd {
	return p.Do(ctx, "WAIT", s.waitReplicas, s.waitTimeout.Milliseconds())
}

// syncAll is a sync point on every master: for writes whose keys are too
// many to name (a collection's deletion).
func (s *CounterStore) syncAll(ctx context.Context) error {
	if s.waitReplicas == 0 {
		return nil
	}
	if s.cluster == nil {
		return s.sync(ctx, s.prefix)
	}
	var mu sync.Mutex
	var keys []string
	err := s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		slots, err := c.ClusterSlots(ctx).Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, r := range slots {
			keys = append(keys, s.prefix+"{"+slotTags()[r.Start]+"}")
		}
		return nil
	})
	if err != nil {
		return storeErr("wait for replicas", err, true)
	}
	return s.sync(ctx, keys...)
}

// nodeRun is a pipeline of write scripts for one node, followed by a WAIT
// when WaitReplicas is set.
type nodeRun struct {
	node    *goredis.Client
	cmds    []*goredis.Cmd
	build   []func(p goredis.Pipeliner) *goredis.Cmd
	waitErr error // the WAIT fell short: what the scripts applied is outcome unknown
}

// runOnNodes runs each node's pipeline, concurrently.
func (s *CounterStore) runOnNodes(ctx context.Context, runs []*nodeRun) {
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			r.cmds = make([]*goredis.Cmd, len(r.build))
			var w *goredis.Cmd
			_, err := r.node.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for i, b := range r.build {
					r.cmds[i] = b(p)
				}
				if s.waitReplicas > 0 {
					w = s.wait(ctx, p)
				}
				return nil
			})
			if w != nil {
				if err != nil && w.Err() == nil {
					w.SetErr(err)
				}
				r.waitErr = s.waited(w, r.node.Options().Addr)
			}
		})
	}
	wg.Wait()
}

// nodeRuns gathers commands into one nodeRun per node.
type nodeRuns struct {
	s      *CounterStore
	runs   []*nodeRun
	byNode map[*goredis.Client]*nodeRun
	err    error // the last error finding a node
}

func newNodeRuns(s *CounterStore) *nodeRuns {
	return &nodeRuns{s: s, byNode: make(map[*goredis.Client]*nodeRun)}
}

// add queues b on the node that serves key and returns where its command
// will be (run.cmds[at]), or a nil run when the node cannot be found (the
// error is in err).
func (nr *nodeRuns) add(ctx context.Context, key string, b func(p goredis.Pipeliner) *goredis.Cmd) (*nodeRun, int) {
	node, err := nr.s.node(ctx, key)
	if err != nil {
		nr.s.refresh(ctx, err)
		nr.err = err
		return nil, 0
	}
	r := nr.byNode[node]
	if r == nil {
		r = &nodeRun{node: node}
		nr.byNode[node] = r
		nr.runs = append(nr.runs, r)
	}
	r.build = append(r.build, b)
	return r, len(r.build) - 1
}

// firstErr returns the first error of the runs' commands or WAITs,
// after loading the scripts where a node did not have them.
func (nr *nodeRuns) firstErr(ctx context.Context) error {
	if err := nr.loadScripts(ctx); err != nil {
		return err
	}
	for _, r := range nr.runs {
		for _, c := range r.cmds {
			if err := c.Err(); err != nil {
				return err
			}
		}
		if r.waitErr != nil {
			return r.waitErr
		}
	}
	return nil
}

// loadScripts loads the scripts on every node that answered NOSCRIPT, for
// the next attempt.
func (nr *nodeRuns) loadScripts(ctx context.Context) error {
	for _, r := range nr.runs {
		for _, c := range r.cmds {
			if goredis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
				if err := nr.s.loadScriptsOn(ctx, r.node); err != nil {
					return storeErr("load scripts", err, false)
				}
				break
			}
		}
	}
	return nil
}
