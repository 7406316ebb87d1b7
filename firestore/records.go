package firestore

import (
	"context"
	"errors"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/internal/docstore"
)

// records adapts the store to docstore.Records: a record is a document of
// a top-level collection (sc_collections, sc_rankings), its id the escaped
// name, its fields the record's.
type records struct{ s *CounterStore }

// GetRecord reads a record's document.
func (r records) GetRecord(ctx context.Context, t docstore.Table, name string) (docstore.Record, error) {
	snap, err := r.s.client.Collection(t.Name).Doc(Escape(name)).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, readError("read "+t.Noun, err)
	}
	return snap.Data(), nil
}

// ListRecords reads the table's documents.
func (r records) ListRecords(ctx context.Context, t docstore.Table) ([]docstore.Record, error) {
	snaps, err := r.s.client.Collection(t.Name).Documents(ctx).GetAll()
	if err != nil {
		return nil, readError("list "+t.Noun+"s", err)
	}
	out := make([]docstore.Record, len(snaps))
	for i, snap := range snaps {
		out[i] = snap.Data()
	}
	return out, nil
}

// PutRecord writes with the version it read as precondition: a Create
// where it found none, which Firestore refuses when the document exists.
// It reads again after a conflict, up to ten times.
func (r records) PutRecord(ctx context.Context, op string, t docstore.Table, name string, f func(docstore.Record) (docstore.Record, bool, error)) error {
	ref := r.s.client.Collection(t.Name).Doc(Escape(name))
	for attempt := 0; ; attempt++ {
		snap, err := ref.Get(ctx)
		var old docstore.Record
		switch {
		case err == nil:
			old = snap.Data()
		case status.Code(err) != codes.NotFound:
			return readError("read "+t.Noun, err)
		}
		rec, write, err := f(old)
		if err != nil || !write {
			return err
		}
		switch {
		case old == nil:
			_, err = ref.Create(ctx, rec)
		case rec == nil:
			_, err = ref.Delete(ctx, firestore.LastUpdateTime(snap.UpdateTime))
		default:
			ups := make([]firestore.Update, 0, len(rec))
			for k, v := range rec {
				ups = append(ups, firestore.Update{Path: k, Value: v})
			}
			_, err = ref.Update(ctx, ups, firestore.LastUpdateTime(snap.UpdateTime))
		}
		if err == nil || !errors.Is(commitError(err), errConflict) || attempt == 10 {
			return writeError(op, err)
		}
	}
}

// rankingsTable holds one document per ranking (docstore.Rankings).
var rankingsTable = docstore.Table{Name: "sc_rankings", Noun: "ranking"}

var _ shardcounter.RankingStore = (*CounterStore)(nil)
