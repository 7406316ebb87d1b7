package docstore

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/shardcounter/shardcounter"
)

// Table is one kind of small record a store keeps whole, by name: the
// collections' metadata, the rankings. A record is one document
// (Firestore) or entity (Datastore) of the store's collection or kind
// Name, its id (key name) the escaped record name.
type Table struct {
	Name string // the Firestore collection or Datastore kind
	Noun string // what the records are, for errors: "read collection"
	// Parent and ParentName are the record whose children the records
	// are (Datastore's documents of a collection); nil: none.
	Parent     *Table
	ParentName string
}

// Record is a record's fields: strings, int64s, times and, for a
// collection's indexes, a []string (Datastore keeps it as its JSON, a
// Firestore read returns it as []any).
type Record = map[string]any

// Records is what a store adapts so that the logic of its records is
// written once, here: a read, a listing and one atomic read-and-write,
// each with the store's own errors ("read NOUN", "list NOUNs", op).
type Records interface {
	// GetRecord returns name's record in t, or nil when it has none.
	GetRecord(ctx context.Context, t Table, name string) (Record, error)
	// ListRecords returns every record of t, in any order.
	ListRecords(ctx context.Context, t Table) ([]Record, error)
	// PutRecord reads name's record (nil when none), passes it to f and
	// writes what f returns in its place (nil: deletes it), unless f
	// returns false or an error; atomically, as a commit with a
	// precondition (Firestore) or a transaction (Datastore), reading again
	// when another writer came first. f may run more than once.
	PutRecord(ctx context.Context, op string, t Table, name string, f func(old Record) (Record, bool, error)) error
}

// Rankings are the shardcounter.RankingStore of a store, over its
// Records: one record per ranking, its name and its definition's JSON
// (shardcounter.EncodeRanking) in fields "name" and "definition". A store
// holds at most shardcounter.MaxRankings, so a listing is one query.
type Rankings struct {
	records Records
	table   Table
}

// NewRankings returns the rankings kept in t.
func NewRankings(r Records, t Table) Rankings { return Rankings{records: r, table: t} }

// CreateRanking records r unless its name is taken, and returns the
// ranking stored under the name.
func (rs Rankings) CreateRanking(ctx context.Context, r *shardcounter.Ranking) (*shardcounter.Ranking, bool, error) {
	var old Record
	err := rs.records.PutRecord(ctx, "create ranking", rs.table, r.Name, func(rec Record) (Record, bool, error) {
		old = rec
		return Record{"name": r.Name, "definition": string(shardcounter.EncodeRanking(r))}, rec == nil, nil
	})
	switch {
	case err != nil:
		return nil, false, err
	case old != nil:
		r, err := rankingOf(old)
		return r, false, err
	}
	return r, true, nil
}

// GetRanking returns a ranking, or ErrNotFound.
func (rs Rankings) GetRanking(ctx context.Context, name string) (*shardcounter.Ranking, error) {
	rec, err := rs.records.GetRecord(ctx, rs.table, name)
	if err != nil || rec == nil {
		return nil, cmp.Or(err, shardcounter.RankingNotFound(name))
	}
	return rankingOf(rec)
}

func rankingOf(rec Record) (*shardcounter.Ranking, error) {
	def, _ := rec["definition"].(string)
	return shardcounter.DecodeRanking([]byte(def))
}

// ListRankings returns every ranking by name.
func (rs Rankings) ListRankings(ctx context.Context) ([]*shardcounter.Ranking, error) {
	recs, err := rs.records.ListRecords(ctx, rs.table)
	if err != nil {
		return nil, err
	}
	out := make([]*shardcounter.Ranking, len(recs))
	for i, rec := range recs {
		if out[i], err = rankingOf(rec); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b *shardcounter.Ranking) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteRanking removes a ranking, or returns ErrNotFound.
func (rs Rankings) DeleteRanking(ctx context.Context, name string) error {
	return rs.records.PutRecord(ctx, "delete ranking", rs.table, name, func(rec Record) (Record, bool, error) {
		if rec == nil {
			return nil, false, shardcounter.RankingNotFound(name)
		}
		return nil, true, nil
	})
}
