package datastore

import (
	"context"
	"strings"

	"cloud.google.com/go/datastore"
	"google.golang.org/api/option"

	"github.com/shardcounter/shardcounter/internal/docstore"
)

// NewWith is New with client options added.
func NewWith(ctx context.Context, project string, opts Options, extra ...option.ClientOption) (*CounterStore, error) {
	return newStore(ctx, project, opts, extra...)
}

// ExpireBatch is docstore.ExpireBatch, for storetest.RunRequestIDExpiry.
const ExpireBatch = docstore.ExpireBatch

// IsMarker reports whether a request document's name is a batch marker's
// (marker.go), which tests that count request ids leave out.
func IsMarker(name string) bool { return strings.HasPrefix(name, markerPrefix) }

// SetCommitLimit lowers the size past which a batch's commit is split.
func SetCommitLimit(s *CounterStore, n int) { s.commitLimit = n }

// SetAfterDeleteCommit sets a function DeleteCounter runs between its
// commit and its sweep (nil: none).
func SetAfterDeleteCommit(s *CounterStore, f func(id string)) { s.afterDeleteCommit = f }

// OwnLeft lists the key names of the member and request entities (batch
// markers left out) under counter id.
func OwnLeft(ctx context.Context, s *CounterStore, id string) (members, requests []string, err error) {
	for _, kind := range []string{memberKind, requestKind} {
		q := datastore.NewQuery(kind).Namespace(s.namespace).Ancestor(s.counterKey(id)).KeysOnly()
		keys, err := s.client.GetAll(ctx, q, nil)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range keys {
			switch {
			case kind == memberKind:
				members = append(members, k.Name)
			case !IsMarker(k.Name):
				requests = append(requests, k.Name)
			}
		}
	}
	return members, requests, nil
}
