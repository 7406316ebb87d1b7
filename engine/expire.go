package engine

import (
	"context"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/expiry"
)

var _ shardcounter.Expirer = (*Engine)(nil)

// ExpireCounter gives name a deadline (shardcounter.Expirer) as a write
// of the group commit (Write.Expire). A cached read may show an expired
// counter for up to its staleness bound; strong reads never do.
func (e *Engine) ExpireCounter(ctx context.Context, name string, at time.Time) (bool, error) {
	return e.change(ctx, name, shardcounter.ExpireChange{At: max(at.UnixMilli(), 1)})
}

// PersistCounter removes name's deadline (shardcounter.Expirer), as a
// write of the group commit.
func (e *Engine) PersistCounter(ctx context.Context, name string) (bool, error) {
	return e.change(ctx, name, shardcounter.ExpireChange{Cond: "xx"})
}

func (e *Engine) change(ctx context.Context, name string, x shardcounter.ExpireChange) (bool, error) {
	res, err := e.WriteCounter(ctx, shardcounter.Write{Counter: name, Expire: &x})
	if err != nil {
		return false, err
	}
	return res.Applied, nil
}

// CounterTTL reports name's deadline (shardcounter.Expirer).
func (e *Engine) CounterTTL(ctx context.Context, name string) (*shardcounter.TTL, error) {
	return e.expiry.CounterTTL(ctx, name)
}

// splitChanges takes the deadline changes (Write.Expire) out of a batch's
// calls: they are not increments to fold, but items the expiry store adds
// to the commit (expiry.Store.ApplyChanges). Each is Known when a write
// before it in the batch (or an async sum) writes its name.
func splitChanges(b *batch) ([]*call, []*call, []expiry.Change) {
	var n int
	for _, c := range b.calls {
		if c.w.Expire != nil {
			n++
		}
	}
	if n == 0 {
		return b.calls, nil, nil
	}
	calls := make([]*call, 0, len(b.calls)-n)
	changes := make([]*call, 0, n)
	chs := make([]expiry.Change, 0, n)
	written := make(map[string]bool)
	for k := range b.sums {
		written[shardcounter.NameOf(k.counter)] = true
	}
	for _, c := range b.calls {
		if c.w.Expire == nil {
			calls = append(calls, c)
			written[shardcounter.NameOf(c.w.Counter)] = true
			continue
		}
		changes = append(changes, c)
		chs = append(chs, expiry.Change{Name: c.w.Counter, At: c.w.Expire.At, Cond: c.w.Expire.Cond, Known: written[c.w.Counter]})
	}
	return calls, changes, chs
}

// finishChanges gives each deadline change's call its result.
func (e *Engine) finishChanges(changes []*call, res []expiry.ChangeResult, err error) {
	for i, c := range changes {
		c.res = shardcounter.WriteResult{Counter: c.w.Counter}
		switch {
		case err != nil:
			c.err = err
		case res[i].Err != nil:
			c.err = res[i].Err
		default:
			c.res.Applied = res[i].Set
		}
		if c.err != nil {
			e.stats.Errors.Add(1)
		} else {
			e.stats.Writes.Add(1)
		}
	}
}
