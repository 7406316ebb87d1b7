package firestore

import (
	"context"
	"strings"

	"google.golang.org/api/option"

	"github.com/shardcounter/shardcounter/internal/docstore"
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
// commit and its sweep (nil: none).
func SetAfterDeleteCommit(s *CounterStore, f func(id string)) { s.afterDeleteCommit = f }

// OwnLeft lists the names of the member and request documents (batch
// markers left out) under counter id.
func OwnLeft(ctx context.Context, s *CounterStore, id string) (members, requests []string, err error) {
	for _, c := range []string{membersCollection, requestsCollection} {
		docs, err := s.counterRef(id).Collection(c).Documents(ctx).GetAll()
		if err != nil {
			return nil, nil, err
		}
		for _, d := range docs {
			switch {
			case c == membersCollection:
				members = append(members, d.Ref.ID)
			case !IsMarker(d.Ref.ID):
				requests = append(requests, d.Ref.ID)
			}
		}
	}
	return members, requests, nil
}
