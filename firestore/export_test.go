package firestore

import (
	"context"
	"strings"
	"time"

	"google.golang.org/api/option"

	"github.com/shardcounter/shardcounter/internal/docstore"
	"github.com/shardcounter/shardcounter/storetest"
)

// ExpireBatch is docstore.ExpireBatch, for storetest.RunRequestIDExpiry.
const ExpireBatch = docstore.ExpireBatch

// IsMarker reports whether a request document's name is a batch marker's
// (marker.go), which tests that count request ids leave out.
func IsMarker(name string) bool { return strings.HasPrefix(name, markerPrefix) }

// SetCommitLimit lowers the size past which a batch's commit is split.
func SetCommitLimit(s *CounterStore, n int) { s.commitLimit = n }

// NewWith is New with client options added.
func NewWith(ctx context.Context, project, database string, opts Options, extra ...option.ClientOption) (*CounterStore, error) {
	return newStore(ctx, project, database, opts, extra...)
}

// SetAfterDeleteCommit sets a function DeleteCounter runs between its
// commit and its sweep (nil: none); its error ends the delete there.
func SetAfterDeleteCommit(s *CounterStore, f func(id string) error) { s.afterDeleteCommit = f }

// Left lists the member, request and marker documents under counter id,
// by name, and its buckets' starts.
func Left(ctx context.Context, s *CounterStore, id string) (storetest.Left, error) {
	var l storetest.Left
	for _, c := range []string{membersCollection, requestsCollection, bucketsCollection} {
		docs, err := s.counterRef(id).Collection(c).Documents(ctx).GetAll()
		if err != nil {
			return l, err
		}
		for _, d := range docs {
			switch {
			case c == bucketsCollection:
				start, _ := d.Data()[fieldStart].(time.Time)
				l.Buckets = append(l.Buckets, start.UTC())
			case c == membersCollection:
				l.Members = append(l.Members, d.Ref.ID)
			case IsMarker(d.Ref.ID):
				l.Markers = append(l.Markers, d.Ref.ID)
			default:
				l.Requests = append(l.Requests, d.Ref.ID)
			}
		}
	}
	return l, nil
}
