package docstore

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"time"

	"github.com/shardcounter/shardcounter"
)

// Attempts are how a store's Apply goes at one batch: one attempt reads,
// decides and commits; Run repeats it until the batch is applied or
// refused.
type Attempts[A any] struct {
	Store string // "firestore", "datastore": the prefix of errors
	Stats *Stats
	// Marker marks the batch's commits (nil: the batch commits nothing).
	Marker *Marker[A]
	// Conflict is the store's error of an attempt that met another writer
	// (nothing applied): Run tries again after a pause, with backoff, and
	// counts it in Stats.Conflicts. Again, when set, is that of an attempt
	// to make again at once (Firestore's counter that needs its total).
	Conflict, Again error
	// Try makes one attempt: the request ids it recorded, or its error;
	// detached when it goes on without Run (Datastore's transaction
	// outliving its deadline), which then returns at once.
	Try func() (recorded int, detached bool, err error)
	// Get reads the marker: the attempt it names, or found false when it
	// is absent. Done is the bookkeeping of the attempt that it shows
	// applied (settle).
	Get  func(context.Context) (attempt int64, found bool, err error)
	Done func(A)
}

// Run makes attempts until one commits (its request ids recorded), one
// fails for good, or ctx ends. A failed commit that may have applied is
// settled by the batch's marker before anything else: found, its attempt
// is the batch's; absent, the batch goes on; unreadable, Run reads it
// again until ctx ends, and the batch's outcome is then unknown.
func (r *Attempts[A]) Run(ctx context.Context, out []shardcounter.Outcome) (int, error) {
	m := r.Marker
	pause := time.Millisecond
	for {
		recorded, detached, err := r.Try()
		if detached {
			// The attempt goes on without us, with m. Unless it was in its
			// commit (an unknown outcome), it never commits, nor touches
			// m, which an earlier attempt may have made unsure.
			if !shardcounter.IsOutcomeUnknown(err) && m.Unsure() {
				return 0, m.Unknown(ctx.Err())
			}
			return 0, err
		}
		if err != nil && m.Unsure() {
			// A commit of the batch failed, perhaps after applying: its
			// marker says; absent, go on with it.
			if recorded, err = r.settle(ctx, out, err); err != nil && !errors.Is(err, r.Conflict) && !r.again(err) && !IsTooLarge(err) {
				if serr := Sleep(ctx, MarkerWait); serr != nil {
					return 0, m.Unknown(serr)
				}
				continue
			}
		}
		switch {
		case err == nil:
			return recorded, nil
		case r.again(err):
			continue
		case m.Unsure() && IsTooLarge(err):
			// Split, the parts' own markers would not stop the failed
			// commit from applying too, should it yet arrive.
			return 0, shardcounter.OutcomeUnknownf("%s: commit failed (%v), and the batch, decided again, is too large for one commit: not settled", r.Store, m.first)
		case !errors.Is(err, r.Conflict):
			return 0, err
		}
		r.Stats.Conflicts.Add(1)
		if err := Sleep(ctx, mrand.N(pause)+pause/2); err != nil {
			if m.Unsure() {
				return 0, m.Unknown(err)
			}
			return 0, shardcounter.Errorf(shardcounter.EUNAVAILABLE, "%s: the batch kept meeting other writers until %v; nothing applied", r.Store, err)
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

func (r *Attempts[A]) again(err error) bool { return r.Again != nil && errors.Is(err, r.Again) }
