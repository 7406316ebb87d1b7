package shardcounter

import (
	"context"
	"time"
)

// CounterService is the counter API: the seed service's createCounter,
// writeCounter and readCounter, plus batch and windowed reads, members,
// placement, resharding, deletion and listing. The engine implements it
// over a CounterStore, and the HTTP client implements it over the network,
// so the CLI, the RESP front end, tests and Go users share one API.
// Implementations are safe for concurrent use.
//
// Every method returns *Error values: EINVALID for bad arguments,
// ENOTFOUND, EEXISTS, EOUTOFRANGE, EUNAVAILABLE when the store cannot be
// reached (nothing was applied), EOUTCOMEUNKNOWN for a write the store did
// not confirm (it may have been applied), EINTERNAL for a bug.
type CounterService interface {
	// CreateCounter makes a counter whose shards all start at 0. It is
	// idempotent: when the counter exists with the same spec it returns
	// it with created false, so a create retried after a lost reply
	// succeeds; when it exists with another spec it returns ErrExists.
	CreateCounter(ctx context.Context, id string, opts CreateOptions) (c *Counter, created bool, err error)
	// GetCounter returns the counter's metadata.
	GetCounter(ctx context.Context, id string) (*Counter, error)
	// ReadCounter returns the counter's value with the given consistency
	// ("" means Strong).
	ReadCounter(ctx context.Context, id string, c Consistency) (*Reading, error)
	// ReadCounters reads up to MaxReadBatch counters, returning one result
	// per id, in order; a missing counter's result has ErrNotFound. Strong
	// reads are one consistent snapshot across all of them where the
	// store has one (bolt, PostgreSQL, Redis standalone).
	ReadCounters(ctx context.Context, ids []string, c Consistency) ([]ReadResult, error)
	// ReadWindow returns the sum of a windowed counter's writes committed
	// in its last ⌈last/bucket⌉ buckets, the current one (still filling)
	// included, cut to those it retains: on hourly buckets, last=24h is
	// the current hour and the 23 before it. Reading.Window says which
	// interval that is.
	ReadWindow(ctx context.Context, id string, last time.Duration) (*Reading, error)
	// ReadSeries returns a windowed counter's buckets over the last span
	// of time, summed into buckets of the given width (a multiple of the
	// counter's own; 0 means the counter's own): ⌈last/width⌉ of them, as
	// ReadWindow counts, oldest first, zeros included.
	ReadSeries(ctx context.Context, id string, last, bucket time.Duration) (*Series, error)
	// Placement returns each shard's value and the node that holds it.
	Placement(ctx context.Context, id string) (*Placement, error)

	// WriteCounter applies one write. A counter that does not exist is
	// created with the default shard count (a sum counter for a delta
	// write, a distinct one for a member write) when the service allows
	// it.
	WriteCounter(ctx context.Context, w Write) (*WriteResult, error)
	// WriteBatch validates every write first (an invalid one fails the
	// whole call, nothing applied), then applies them and returns one result
	// per write, in order.
	WriteBatch(ctx context.Context, ws []Write) ([]WriteResult, error)

	// IsMember reports whether member is in a distinct counter.
	IsMember(ctx context.Context, id, member string) (bool, error)
	// ListMembers returns a page of a distinct counter's members in byte
	// order (opts.Prefix is not used).
	ListMembers(ctx context.Context, id string, opts ListOptions) (*MemberList, error)

	// ReshardCounter changes the shard count and keeps the value exactly.
	ReshardCounter(ctx context.Context, id string, shards int) (*Counter, error)
	// DeleteCounter removes the counter, its shards, members, buckets and
	// request ids.
	DeleteCounter(ctx context.Context, id string) error
	// ListCounters returns a page of counters in id order.
	ListCounters(ctx context.Context, opts ListOptions) (*CounterList, error)
}
