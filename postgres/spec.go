package postgres

import (
	"strings"
	"time"

	"github.com/shardcounter/shardcounter"
)

// specColumns lists the counters table's columns that hold a Spec, as
// specRow.dest scans them, qualified by the table's alias.
func specColumns(alias string) string {
	cols := []string{"shards", "kind", "min", "max", "bucket", "retention"}
	for i, c := range cols {
		cols[i] = alias + "." + c
	}
	return strings.Join(cols, ", ")
}

// specRow is a Spec as the counters table holds it.
type specRow struct {
	shards            int
	kind              string
	min, max          *int64
	bucket, retention *time.Duration
}

// dest returns the scan destinations of specColumns.
func (r *specRow) dest() []any {
	return []any{&r.shards, &r.kind, &r.min, &r.max, &r.bucket, &r.retention}
}

// spec returns the row as a Spec. The pointers are copied, so a row
// scanned again does not change the specs made from it.
func (r *specRow) spec() shardcounter.Spec {
	s := shardcounter.Spec{Shards: r.shards, Kind: shardcounter.Kind(r.kind)}
	if r.min != nil {
		v := *r.min
		s.Min = &v
	}
	if r.max != nil {
		v := *r.max
		s.Max = &v
	}
	if r.bucket != nil && r.retention != nil {
		s.Window = &shardcounter.Window{Bucket: shardcounter.Duration(*r.bucket), Retention: shardcounter.Duration(*r.retention)}
	}
	return s
}

// rowOf returns the row that holds spec, with Kind "" as KindSum.
func rowOf(spec shardcounter.Spec) specRow {
	r := specRow{shards: spec.Shards, kind: string(spec.Kind), min: spec.Min, max: spec.Max}
	if r.kind == "" {
		r.kind = string(shardcounter.KindSum)
	}
	if w := spec.Window; w != nil {
		b, ret := time.Duration(w.Bucket), time.Duration(w.Retention)
		r.bucket, r.retention = &b, &ret
	}
	return r
}
