package bolt

import (
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// FuzzMeta checks the counter record's decoder: any bytes (a corrupt or
// foreign file) decode to a valid spec or to an error, never a panic, and
// what decodes encodes back to the same record.
func FuzzMeta(f *testing.F) {
	lo, hi := int64(-5), int64(100)
	for _, spec := range []shardcounter.Spec{
		{Shards: 1},
		{Shards: 1024, Kind: shardcounter.KindDistinct},
		{Shards: 3, Min: &lo, Max: &hi},
		{Shards: 2, Min: &lo, Window: &shardcounter.Window{Bucket: shardcounter.BucketHour, Retention: shardcounter.Duration(24 * time.Hour)}},
	} {
		f.Add(encodeMeta(newMeta(spec, 1)))
	}
	f.Add([]byte{0, 4, 0, 0, 0, 0, 0, 0, 0, 1}) // a record from before kinds
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1}) // 0 shards
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			return
		}
		if err := shardcounter.ValidateSpec(m.spec); err != nil {
			t.Fatalf("decodeMeta(%x) = %+v, an invalid spec: %v", b, m.spec, err)
		}
		again, err := decodeMeta(encodeMeta(m))
		if err != nil || !again.spec.Equal(m.spec) || again.spec.Kind != m.spec.Kind || again.createdAt != m.createdAt {
			t.Fatalf("decodeMeta(encodeMeta(%+v)) = %+v, %v", m, again, err)
		}
	})
}
