package docstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/shardcounter/shardcounter"
)

// PropBy names the stamp (NewStamp) of the store that last committed a
// shard document.
const PropBy = "sc_by"

// NewStamp returns a store's random stamp, written on each shard document
// it commits (sc_by), so that the pace across servers tells its own
// commits (the engine's to pace) from another server's (the store's).
func NewStamp() string {
	var r [8]byte
	rand.Read(r[:]) //nolint:errcheck // never fails (crypto/rand)
	return hex.EncodeToString(r[:])
}

// Pace is the latest commit by another server among the shard documents a
// batch read: the batch commits only an interval after it, so that no
// shard document takes two commits by two servers within an interval.
// The servers' clocks (and Firestore's) are taken to agree: the gap
// shrinks by their skew.
type Pace struct{ last time.Time }

// Saw takes in a shard document another server committed at at.
func (p *Pace) Saw(at time.Time) {
	if at.After(p.last) {
		p.last = at
	}
}

// Wait is how long from now the batch must wait before it commits, pacing
// at interval: 0 or less when it is due.
func (p *Pace) Wait(interval time.Duration, now time.Time) time.Duration {
	if p.last.IsZero() {
		return 0
	}
	return p.last.Add(interval).Sub(now)
}

// PaceSleep sleeps the wait of a batch of store that is not due, or
// answers unavailable (nothing applied) when ctx ends first.
func PaceSleep(ctx context.Context, store string, wait time.Duration) error {
	if err := Sleep(ctx, wait); err != nil {
		return shardcounter.Errorf(shardcounter.EUNAVAILABLE, "%s: a shard document another server committed was not due before %v; nothing applied", store, err)
	}
	return nil
}
