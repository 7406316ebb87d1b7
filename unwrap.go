package shardcounter

// Capabilities, found rather than forwarded.
//
// What every store does is a method of CounterStore, so a wrapper that
// embeds the store it wraps (package expiry's, package metrics') passes it
// on by embedding, or changes it by defining the method. What only some
// stores do (TxnApplier, CommitPipeliner, HotCommitPipeliner, MemoryReader,
// ShardPacer, Loader, the collections beside a store's counters, a store's
// own type for its backups) is not: a wrapper that had to forward each of
// those by hand would hide any it forgot (a metrics wrapper hiding
// TxnApplier breaks a Redis Cluster's transactions while every package test
// passes), and a wrapper that forwarded them all would claim what the store
// beneath it lacks, which is why prometheus' promhttp keeps a wrapper type
// for every combination of the optional interfaces of an
// http.ResponseWriter. So a wrapper does neither: it implements Unwrapper,
// and a caller finds an optional capability with As, which looks at the
// store and then down the chain of Unwrap calls, as errors.As looks down a
// chain of errors and http.ResponseController down a chain of
// ResponseWriters.
//
// What As finds beneath a wrapper is the wrapped store's own: a call of it
// bypasses the wrappers above. That is right for what describes the store
// (TxnUnits, TxnScripted, ReadsFromMemory, CommitsInFlight, PipelinesHotCommits,
// ShardWriteInterval) and for what a caller means to do to the store itself
// (a backup, a bulk load beneath the deadlines); behaviour that every call
// must pass through a wrapper for belongs in CounterStore.

// Unwrapper is implemented by a CounterStore that wraps another: Unwrap
// returns the store it wraps, so that As finds the capabilities of the
// stores beneath it. Every wrapper implements it; none forwards an
// optional capability.
type Unwrapper interface {
	Unwrap() CounterStore
}

// As returns the first store in s's chain that is a T — s itself, then
// what its Unwrap returns, and so on — and true; or T's zero value and
// false when none is. T is an optional capability's interface, or a
// store's own type (*pebble.CounterStore, say).
func As[T any](s CounterStore) (T, bool) {
	for s != nil {
		if t, ok := s.(T); ok {
			return t, true
		}
		u, ok := s.(Unwrapper)
		if !ok {
			break
		}
		s = u.Unwrap()
	}
	var zero T
	return zero, false
}
