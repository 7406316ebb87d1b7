package specrec

import (
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

// FuzzRecord checks the decoder of the embedded stores' counter record:
// any bytes (a corrupt or foreign file) decode to a valid spec or to an
// error, never a panic, and what decodes encodes back to the same record.
func FuzzRecord(f *testing.F) {
	lo, hi := int64(-5), int64(100)
	for _, spec := range []shardcounter.Spec{
		{Shards: 1},
		{Shards: 1024, Kind: shardcounter.KindDistinct},
		{Shards: 3, Min: &lo, Max: &hi},
		{Shards: 2, Min: &lo, Window: &shardcounter.Window{Bucket: shardcounter.BucketHour, Retention: shardcounter.Duration(24 * time.Hour)}},
	} {
		f.Add(Encode(Clone(spec), 1))
	}
	f.Add([]byte{0, 4, 0, 0, 0, 0, 0, 0, 0, 1}) // a record from before kinds
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1}) // 0 shards
	f.Fuzz(func(t *testing.T, b []byte) {
		spec, createdAt, err := Decode(b)
		if err != nil {
			return
		}
		if err := shardcounter.ValidateSpec(spec); err != nil {
			t.Fatalf("Decode(%x) = %+v, an invalid spec: %v", b, spec, err)
		}
		again, at, err := Decode(Encode(spec, createdAt))
		if err != nil || !again.Equal(spec) || again.Kind != spec.Kind || at != createdAt {
			t.Fatalf("Decode(Encode(%+v, %d)) = %+v, %d, %v", spec, createdAt, again, at, err)
		}
	})
}
