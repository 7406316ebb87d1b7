package engine

import (
	"context"

	"github.com/shardcounter/shardcounter"
)

// Throttles: takes under a policy the caller gives with each take, with no
// definition, as redis-cell's CL.THROTTLE takes them (resp/server). A key
// throttled under a policy has its state counter under an implicit limit
// whose name holds the policy (throttleName), so that the takes of one key
// with the same policy share a state and those with another policy have a
// state of their own: neither reads the other's under rules it was not
// taken under. The implicit name starts with U+001E, which no defined
// limit's name may hold, so a throttle never meets a limit of
// PUT /v1/limits, and ListLimits does not list it.

// throttleName is the implicit limit of the throttles of policy p.
func throttleName(p shardcounter.LimitPolicy) string {
	return shardcounter.InternalPrefix + "throttle " + p.String()
}

// ThrottleKeyID is the id of the state counter of key throttled under p
// (with its defaults).
func ThrottleKeyID(p shardcounter.LimitPolicy, key string) string {
	return shardcounter.LimitKeyID(throttleName(p), p, key)
}

// Throttle takes cost (at least 1) from key under policy p, decided in
// the group commit as Take decides a defined limit's, and answers once
// the decision is committed; with peek it answers what the take would
// and takes nothing. A store that does not decide takes refuses it
// (shardcounter.IsLimitsUnsupported).
func (e *Engine) Throttle(ctx context.Context, key string, p shardcounter.LimitPolicy, cost int64, peek bool) (*shardcounter.LimitResult, error) {
	if err := shardcounter.ValidateName("limit key", key); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateLimitPolicy(p); err != nil {
		return nil, err
	}
	if err := shardcounter.ValidateTake(cost); err != nil {
		return nil, err
	}
	p = p.WithDefaults()
	w := shardcounter.Write{
		Counter: ThrottleKeyID(p, key),
		Take:    &shardcounter.LimitTake{Policy: p, Cost: cost, Peek: peek},
	}
	c, _, err := e.commitOne(ctx, w)
	if err != nil {
		return nil, err
	}
	if c.res.Limit == nil {
		return nil, shardcounter.Errorf(shardcounter.EINTERNAL, "the store applied a throttle of key %q without deciding it", key)
	}
	r := *c.res.Limit
	e.countTake(w.Take, &r)
	return &r, nil
}

// TakesInTransactions reports whether a take (Write.Take) can be one of a
// run of writes joined by Write.JoinNext (a RESP transaction) and be
// decided in its commit. On a store that decides a batch through package
// decide (Pebble, bolt, PostgreSQL, Firestore, Datastore) the run is one
// atomic step with the take in it. A store that applies a transaction by
// a script of its own (shardcounter.TxnScripter: Redis, Redis Cluster)
// carries deltas and members in it but no take (a take is a script of its
// own there), and refuses it.
func (e *Engine) TakesInTransactions() bool { return !e.txnScripts }

// countTake counts a take's decision in the engine's statistics, as Take
// does; a peek, or a take the store did not decide, counts nothing.
func (e *Engine) countTake(t *shardcounter.LimitTake, r *shardcounter.LimitResult) {
	switch {
	case r == nil || t.Peek:
	case r.Allowed:
		e.stats.LimitAllowed.Add(1)
	default:
		e.stats.LimitRefused.Add(1)
	}
}
