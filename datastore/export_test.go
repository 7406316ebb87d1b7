package datastore

import (
	"context"
	"strings"

	"cloud.google.com/go/datastore"
	"google.golang.org/api/option"

	"github.com/shardcounter/shardcounter/internal/docstore"
	"github.com/shardcounter/shardcounter/storetest"
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
// commit and its sweep (nil: none); its error ends the delete there.
func SetAfterDeleteCommit(s *CounterStore, f func(id string) error) { s.afterDeleteCommit = f }

// Left lists the member, request and marker entities under counter id,
// by key name, and its buckets' starts.
func Left(ctx context.Context, s *CounterStore, id string) (storetest.Left, error) {
	var l storetest.Left
	for _, kind := range []string{memberKind, requestKind} {
		q := datastore.NewQuery(kind).Namespace(s.namespace).Ancestor(s.counterKey(id)).KeysOnly()
		keys, err := s.client.GetAll(ctx, q, nil)
		if err != nil {
			return l, err
		}
		for _, k := range keys {
			switch {
			case kind == memberKind:
				l.Members = append(l.Members, k.Name)
			case IsMarker(k.Name):
				l.Markers = append(l.Markers, k.Name)
			default:
				l.Requests = append(l.Requests, k.Name)
			}
		}
	}
	var bs []bucketEntity
	if _, err := s.client.GetAll(ctx, datastore.NewQuery(bucketKind).Namespace(s.namespace).Ancestor(s.counterKey(id)), &bs); err != nil {
		return l, err
	}
	for _, b := range bs {
		l.Buckets = append(l.Buckets, b.Start.UTC())
	}
	return l, nil
}
