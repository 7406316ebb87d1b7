package expiry

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardcounter/shardcounter"
)

// Record ids (see the package documentation).
const (
	tagDeadline = "d"
	tagIndex    = "q"
	inUseID     = shardcounter.InternalPrefix + "u"
)

// RecordID returns the id of the record that holds name's deadline.
func RecordID(name string) string { return shardcounter.InternalPrefix + tagDeadline + name }

// IndexID returns the id of the index entry of name's deadline at ms.
func IndexID(ms int64, name string) string {
	return fmt.Sprintf("%s%s%016x%s", shardcounter.InternalPrefix, tagIndex, ms, name)
}

// parseIndexID splits an index entry's id into its deadline and name.
func parseIndexID(id string) (int64, string, bool) {
	p := shardcounter.InternalPrefix + tagIndex
	if len(id) < len(p)+16 || id[:len(p)] != p {
		return 0, "", false
	}
	ms, err := strconv.ParseUint(id[len(p):len(p)+16], 16, 63)
	if err != nil {
		return 0, "", false
	}
	return int64(ms), id[len(p)+16:], true
}

// SweepBatch is how many index entries one sweep looks at.
const SweepBatch = 16

// Options configure Wrap.
type Options struct {
	// Now is the clock deadlines are set and compared by; nil means
	// time.Now.
	Now func() time.Time
	// Refresh bounds how long a deadline read from the store is trusted:
	// how late this process may see another's change. 0 means a second.
	Refresh time.Duration
	// Observer, when set, hears of each deletion of an expired name the
	// Store makes on its own (before a write to it, or by the sweep) as a
	// shardcounter.CommitDelete: the engine's rankings must read such a
	// counter again, and nobody else knows it went. The deletions and
	// resets a caller asks for are the caller's to report.
	Observer shardcounter.CommitObserver
}

// Store is a CounterStore with deadlines. Its CounterStore methods refuse
// internal ids; the embedded store is used for everything a deadline does
// not change. It forwards no optional capability: they are found beneath
// it with shardcounter.As (Unwrap).
type Store struct {
	shardcounter.CounterStore
	now     func() time.Time
	refresh time.Duration
	cache   *cache
	obs     shardcounter.CommitObserver // nil: nobody listens

	locks  [64]sync.Mutex // per name, by hash: deadline changes and purges
	resets resetLocks     // per counter, by hash: resets alone, writes shared (reset.go)

	inUse     atomic.Bool  // the U+001E "u" record was seen or written
	inUseSeen atomic.Int64 // when it was last looked for (Unix ns)

	sweeping  atomic.Bool
	nextSweep atomic.Int64 // Unix ns before which no sweep is due

	lastStamp atomic.Int64 // of the newest member this process made (records.go)
}

var _ shardcounter.CounterStore = (*Store)(nil)

// Wrap returns store with deadlines.
func Wrap(store shardcounter.CounterStore, opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Refresh <= 0 {
		opts.Refresh = time.Second
	}
	return &Store{CounterStore: store, now: opts.Now, refresh: opts.Refresh, cache: newCache(opts.Refresh), obs: opts.Observer}
}

// Unwrap returns the wrapped store (shardcounter.Unwrapper), where
// shardcounter.As finds what the store does beyond CounterStore, and where
// the deadline records are counters like any other.
func (s *Store) Unwrap() shardcounter.CounterStore { return s.CounterStore }

func (s *Store) lock(name string) *sync.Mutex { return &s.locks[s.lockIndex(name)] }

func (s *Store) lockIndex(name string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % uint32(len(s.locks)))
}

// refuse returns ErrInvalid for an internal id, which only this package
// writes.
func refuse(ids ...string) error {
	for _, id := range ids {
		if shardcounter.IsInternalID(id) {
			return shardcounter.Errorf(shardcounter.EINVALID, "counter id %q starts with U+001E, reserved for internal records: remove it", id)
		}
	}
	return nil
}

// used reports whether deadlines were ever set in the store, looking for
// the marker at most once a Refresh while it is missing.
func (s *Store) used(ctx context.Context) (bool, error) {
	if s.inUse.Load() {
		return true, nil
	}
	now := time.Now().UnixNano()
	if now-s.inUseSeen.Load() < int64(s.refresh) {
		return false, nil
	}
	_, err := s.CounterStore.GetCounter(ctx, inUseID)
	switch {
	case errors.Is(err, shardcounter.ErrNotFound):
		s.inUseSeen.Store(now)
		return false, nil
	case err != nil:
		return false, err
	}
	s.inUse.Store(true)
	return true, nil
}

// mark writes the marker that deadlines are in use, U+001E "u", unless
// this Store has seen or written it: a commit of its own, before the
// commit of the first deadline records it announces. Another process
// looks a name's deadline up only once it has seen the marker, so the
// marker must land no later than any record. In the batch's own commit
// it would not: a document store splits a batch past its commit limit
// between counters, the marker's part apart from the records', each a
// commit that may fail alone (internal/docstore.Split), and no one item
// of the batch goes in every part. Tying the marker to one record's part
// (its Txn, its condition) would leave the records of the other parts
// unannounced. A commit of its own costs one commit a process, until it
// sees the marker in the store; a marker whose records then fail to land
// costs only the lookups it makes other processes do.
func (s *Store) mark(ctx context.Context) error {
	if s.inUse.Load() {
		return nil
	}
	out, err := s.CounterStore.Apply(ctx, []shardcounter.Increment{{Counter: inUseID, Delta: 1, Create: indexSpec}})
	if err == nil {
		err = out[0].Err
	}
	if err != nil {
		return err
	}
	s.inUse.Store(true)
	return nil
}

// deadlines returns the deadline of each name in Unix ms, 0 for none,
// from the cache or, for what it misses, from the store.
func (s *Store) deadlines(ctx context.Context, names []string) ([]int64, error) {
	es, err := s.states(ctx, names)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(names))
	for i, e := range es {
		out[i] = e.deadline
	}
	return out, nil
}

// states returns what is known of each name's record, from the cache or,
// for what it misses, from the store.
func (s *Store) states(ctx context.Context, names []string) ([]entry, error) {
	out := make([]entry, len(names))
	if ok, err := s.used(ctx); !ok || err != nil {
		return out, err
	}
	var miss []string // each name the cache misses, once
	first := make(map[string]int)
	for i, n := range names {
		if _, ok := first[n]; ok {
			continue
		}
		first[n] = i
		if e, ok := s.cache.get(n); ok {
			out[i] = e
		} else {
			miss = append(miss, n)
		}
	}
	if len(miss) > 0 {
		es, err := s.load(ctx, miss)
		if err != nil {
			return nil, err
		}
		for j, n := range miss {
			out[first[n]] = es[j]
		}
	}
	for i, n := range names { // a name given again reads as its first
		out[i] = out[first[n]]
	}
	return out, nil
}

// load reads the records of names from the store into the cache, tidying
// those that hold more than their newest member.
func (s *Store) load(ctx context.Context, names []string) ([]entry, error) {
	es, untidy, err := readRecords(ctx, s.CounterStore, names)
	if err != nil {
		return nil, err
	}
	for i, n := range names {
		s.cache.put(n, es[i])
	}
	for _, i := range untidy {
		if err := s.tidy(ctx, names[i], es[i].member); err != nil {
			return nil, err
		}
	}
	return es, nil
}

// fresh reads name's deadline from the store, past the cache.
func (s *Store) fresh(ctx context.Context, name string) (int64, error) {
	es, err := s.load(ctx, []string{name})
	if err != nil {
		return 0, err
	}
	return es[0].deadline, nil
}

func (s *Store) nowMS() int64 { return s.now().UnixMilli() }

func expired(d, now int64) bool { return d != 0 && d <= now }

// live returns, for each id, whether its name has not expired, purging
// the expired names when purge is set (before a write). A name the cache
// says expired is read again from the store, so that a name another
// process wrote anew is never taken for absent.
func (s *Store) live(ctx context.Context, ids []string, purge bool) ([]bool, error) {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = shardcounter.NameOf(id)
	}
	ds, err := s.deadlines(ctx, names)
	if err != nil {
		return nil, err
	}
	now := s.nowMS()
	ok := make([]bool, len(ids))
	checked := map[string]int64{}
	for i, d := range ds {
		if ok[i] = !expired(d, now); ok[i] {
			continue
		}
		cur, seen := checked[names[i]]
		if !seen {
			if cur, err = s.fresh(ctx, names[i]); err != nil {
				return nil, err
			}
			checked[names[i]] = cur
			if purge && expired(cur, now) {
				if err := s.purge(ctx, names[i], cur); err != nil {
					return nil, err
				}
			}
		}
		ok[i] = !expired(cur, now)
	}
	return ok, nil
}

// alive returns ErrNotFound when id's name has expired.
func (s *Store) alive(ctx context.Context, id string, purge bool) error {
	if err := refuse(id); err != nil {
		return err
	}
	ok, err := s.live(ctx, []string{id}, purge)
	if err != nil {
		return err
	}
	if !ok[0] {
		return shardcounter.Errorf(shardcounter.ENOTFOUND, "counter %q not found: it expired", id)
	}
	return nil
}

// purge deletes name (its counter, or each field of its hash) and its
// deadline record when the record still holds the deadline d that
// expired, so that a deadline set anew meanwhile is kept.
func (s *Store) purge(ctx context.Context, name string, d int64) error {
	mu := s.lock(name)
	mu.Lock()
	defer mu.Unlock()
	cur, err := s.fresh(ctx, name)
	if err != nil || cur != d || !expired(cur, s.nowMS()) {
		return err
	}
	if err := s.deleteName(ctx, name); err != nil {
		return err
	}
	return s.dropRecord(ctx, name)
}

// deleteName deletes the counter name and every field of a hash name,
// each deletion observed (Options.Observer).
func (s *Store) deleteName(ctx context.Context, name string) error {
	if err := s.deleteObserved(ctx, name); err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
		return err
	}
	prefix := shardcounter.HashFieldPrefix(name)
	for {
		cs, err := s.CounterStore.ListCounters(ctx, prefix, "", shardcounter.MaxListLimit)
		if err != nil {
			return err
		}
		for _, c := range cs {
			if err := s.deleteObserved(ctx, c.ID); err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
				return err
			}
		}
		if len(cs) < shardcounter.MaxListLimit {
			return nil
		}
	}
}

// deleteObserved deletes counter id as a commit Options.Observer hears of.
func (s *Store) deleteObserved(ctx context.Context, id string) error {
	c := &shardcounter.Commit{Op: shardcounter.CommitDelete, Counter: id}
	return shardcounter.Observe(ctx, s.obs, s.now, c, func(ctx context.Context) error {
		return s.CounterStore.DeleteCounter(ctx, id)
	})
}

// dropRecord deletes name's deadline record.
func (s *Store) dropRecord(ctx context.Context, name string) error {
	err := s.CounterStore.DeleteCounter(ctx, RecordID(name))
	if err != nil && !errors.Is(err, shardcounter.ErrNotFound) {
		return err
	}
	s.cache.put(name, entry{})
	return nil
}

// exists reports whether name holds a counter or a hash's field.
func (s *Store) exists(ctx context.Context, name string) (bool, error) {
	_, err := s.CounterStore.GetCounter(ctx, name)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, shardcounter.ErrNotFound) {
		return false, err
	}
	return s.hashExists(ctx, name)
}
