package transfer_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/bolt"
	"github.com/shardcounter/shardcounter/sketch"
	"github.com/shardcounter/shardcounter/transfer"
)

const header = `{"type":"header","format":"shardcounter-export","version":1}` + "\n"

// header2 is the header of a version 2 export, which has deadlines and
// rankings.
const header2 = `{"type":"header","format":"shardcounter-export","version":2}` + "\n"

const rank = `{"type":"ranking","name":"top","prefix":"p:","size":10,"max_staleness":"1s"}` + "\n"

const coll = `{"type":"collection","name":"c","shards":2,"timestamp_field":"timestamp","indexes":["user"],"shard_key":"random"}` + "\n"

// TestDecodeErrors checks that each kind of bad input is an error naming
// its line.
func TestDecodeErrors(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"Empty", "", "line 1: the input is empty"},
		{"NotExport", `{"a":1}` + "\n", "line 1: not a header"},
		{"NewerVersion", `{"type":"header","format":"shardcounter-export","version":3}` + "\n", "line 1: export format version 3"},
		{"NoEnd", header + `{"type":"counter","id":"a","kind":"sum","shards":1,"value":1}` + "\n", "line 3: the export ends after line 2 without its end line"},
		{"CutLine", header + `{"type":"counter","id":"a","kind":"sum","sha`, "line 2: cut short"},
		{"BadJSON", header + "{nope\n", "line 2: not a JSON object"},
		{"UnknownField", header + `{"type":"counter","id":"a","kind":"sum","shards":1,"value":1,"colour":2}` + "\n", `line 2: counter: json: unknown field "colour"`},
		{"BadShards", header + `{"type":"counter","id":"a","kind":"sum","shards":0,"value":1}` + "\n", "line 2: counter \"a\": shard count 0"},
		{"Order", header + `{"type":"counter","id":"b","kind":"sum","shards":1,"value":1}` + "\n" + `{"type":"counter","id":"a","kind":"sum","shards":1,"value":1}` + "\n", `line 3: counter "a" comes after "b"`},
		{"StrayMembers", header + `{"type":"counter","id":"a","kind":"sum","shards":1,"value":1}` + "\n" + `{"type":"members","id":"a","members":["x"]}` + "\n", "line 3: members of \"a\" do not follow"},
		{"EndCount", header + `{"type":"end","counters":3,"members":0}` + "\n", "line 2: the end line counts 3 counters"},
		{"Joined", header + `{"type":"end","counters":0,"members":0}` + "\n" + header, "line 2: more lines after the end line"},
		{"UnknownType", header + `{"type":"gauge"}` + "\n", `line 2: record type "gauge" is unknown`},
		{"RankingInV1", header + rank, `line 2: a ranking line in a version 1 export`},
		{"ExpiresInV1", header + `{"type":"counter","id":"a","kind":"sum","shards":1,"value":1,"expires_at":"2030-01-01T00:00:00Z"}` + "\n", `line 2: counter "a" has expires_at, which version 1 does not have`},
		{"ExpiresSubMS", header2 + `{"type":"counter","id":"a","kind":"sum","shards":1,"value":1,"expires_at":"2030-01-01T00:00:00.0000001Z"}` + "\n", `line 2: counter "a": expires_at`},
		{"InternalID", header2 + `{"type":"counter","id":"\u001et1","kind":"sum","shards":1,"value":1}` + "\n", `line 2: counter "\x1et1" starts with U+001E`},
		{"RankingOrder", header2 + rank + rank, `line 3: ranking "top" comes after "top"`},
		{"BadRanking", header2 + `{"type":"ranking","name":"top","size":-1}` + "\n", `line 2: ranking "top": ranking size -1`},
		{"CounterAfterRanking", header2 + rank + `{"type":"counter","id":"a","kind":"sum","shards":1,"value":1}` + "\n", `line 3: counter "a" comes after a ranking or a collection`},
		{"RankingAfterCollection", header2 + coll + rank, `line 3: ranking "top" comes after a collection`},
		{"EndRankings", header2 + rank + `{"type":"end","counters":0,"members":0}` + "\n", "line 3: the end line counts 0 counters, 0 members, 0 rankings"},
		{"StrayDocument", header + `{"type":"document","collection":"c","id":"d","shard":0,"timestamp":"2026-01-01T00:00:00Z","data":{}}` + "\n", `line 2: document "d" of collection "c" does not follow`},
		{"DocumentShard", header + coll + `{"type":"document","collection":"c","id":"d","shard":2,"timestamp":"2026-01-01T00:00:00Z","data":{}}` + "\n", `line 3: document "d" is on shard 2: collection "c" has shards 0 to 1`},
		{"CounterAfterCollection", header + coll + `{"type":"counter","id":"a","kind":"sum","shards":1,"value":1}` + "\n", `line 3: counter "a" comes after a ranking or a collection`},
		{"BadCollection", header + `{"type":"collection","name":"c","shards":2,"timestamp_field":"timestamp","indexes":["timestamp"],"shard_key":"random"}` + "\n", `line 2: collection "c": index "timestamp" is the timestamp field`},
		{"SketchOnSum", header2 + `{"type":"counter","id":"a","kind":"sum","shards":1,"value":1,"sketches":[""]}` + "\n", `line 2: counter "a" is a sum counter: only an approx counter has sketches`},
		{"SketchCount", header2 + `{"type":"counter","id":"a","kind":"approx","shards":2,"value":0,"sketches":[""]}` + "\n", `line 2: approx counter "a" has 1 sketches for its 2 shards`},
		{"NoSketches", header2 + `{"type":"counter","id":"a","kind":"approx","shards":1,"value":0}` + "\n", `line 2: approx counter "a" has 0 sketches for its 1 shards`},
		{"BadSketch", header2 + `{"type":"counter","id":"a","kind":"approx","shards":1,"value":0,"sketches":["AQID"]}` + "\n", `line 2: approx counter "a", shard 0: sketch:`},
		{"SketchBase64", header2 + `{"type":"counter","id":"a","kind":"approx","shards":1,"value":0,"sketches":["!"]}` + "\n", `line 2: counter: illegal base64`},
		{"ApproxNegative", header2 + `{"type":"counter","id":"a","kind":"approx","shards":1,"value":-1,"sketches":[""]}` + "\n", `line 2: approx counter "a" has value -1`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := decodeAll(c.in)
			var le *transfer.LineError
			if err == nil || !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a line error with %q", err, c.want)
			}
		})
	}
}

func decodeAll(in string) error {
	d, err := transfer.NewDecoder(strings.NewReader(in))
	if err != nil {
		return err
	}
	for {
		if _, err := d.Next(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// TestImportStopsAtBadLine checks that a malformed line stops an import
// and that the counters before it in the same batch are not written.
func TestImportStopsAtBadLine(t *testing.T) {
	s := openBolt(t)
	in := header + `{"type":"counter","id":"a","kind":"sum","shards":1,"value":5}` + "\n" + "garbage\n"
	_, err := transfer.Import(context.Background(), s, strings.NewReader(in), transfer.ImportOptions{})
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("import: %v", err)
	}
	if _, err := s.GetCounter(context.Background(), "a"); shardcounter.ErrorCode(err) != shardcounter.ENOTFOUND {
		t.Fatalf("counter a after a failed import: %v", err)
	}
}

// TestImportConflict checks that a counter with other options is left
// alone and reported, and replaced with Replace.
func TestImportConflict(t *testing.T) {
	ctx := context.Background()
	s := openBolt(t)
	if _, err := s.CreateCounter(ctx, "a", shardcounter.Spec{Shards: 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, "a", 3, 0); err != nil {
		t.Fatal(err)
	}
	in := header + `{"type":"counter","id":"a","kind":"sum","shards":4,"value":5}` + "\n" + `{"type":"end","counters":1,"members":0}` + "\n"
	var reported []string
	st, err := transfer.Import(ctx, s, strings.NewReader(in), transfer.ImportOptions{Conflict: func(id string, have, want shardcounter.Spec) {
		reported = append(reported, id)
	}})
	if err != nil || st.Conflicts != 1 || len(reported) != 1 {
		t.Fatalf("import: %+v, %v, reported %v", st, err, reported)
	}
	if r, _ := s.ReadCounter(ctx, "a"); r.Value != 3 || r.Shards != 2 {
		t.Fatalf("a after a conflict: %+v", r)
	}
	st, err = transfer.Import(ctx, s, strings.NewReader(in), transfer.ImportOptions{Replace: true})
	if err != nil || st.Replaced != 1 {
		t.Fatalf("import --replace: %+v, %v", st, err)
	}
	if r, _ := s.ReadCounter(ctx, "a"); r.Value != 5 || r.Shards != 4 {
		t.Fatalf("a after --replace: %+v", r)
	}
}

func openBolt(t *testing.T) shardcounter.CounterStore {
	s, err := bolt.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// FuzzDecode feeds the decoder arbitrary input after a valid header: it
// must return records or a line error, never panic, and whatever it
// accepts must encode again to input it accepts.
func FuzzDecode(f *testing.F) {
	f.Add(`{"type":"counter","id":"a","kind":"sum","shards":1,"value":1}` + "\n" + `{"type":"end","counters":1,"members":0}` + "\n")
	f.Add(`{"type":"counter","id":"d","kind":"distinct","shards":2,"value":1}` + "\n" + `{"type":"members","id":"d","members":["x"]}` + "\n" + `{"type":"end","counters":1,"members":1}` + "\n")
	f.Add(`{"type":"counter","id":"w","kind":"sum","shards":1,"window":{"bucket":"1h","retention":"1d"},"value":3,"buckets":[{"start":"2026-01-01T01:00:00Z","value":3}]}` + "\n" + `{"type":"end","counters":1,"members":0}` + "\n")
	f.Add(coll + `{"type":"document","collection":"c","id":"d","shard":1,"timestamp":"2026-01-01T00:00:00.000001Z","data":{"user":"u","n":1.5}}` + "\n" + `{"type":"end","counters":0,"members":0,"collections":1,"documents":1}` + "\n")
	f.Add(`{"type":"counter","id":"h\u001ff","kind":"sum","shards":1,"value":2,"expires_at":"2030-01-01T00:00:00.123Z"}` + "\n" + rank + coll + `{"type":"end","counters":1,"members":0,"collections":1,"rankings":1}` + "\n")
	one, _, _ := sketch.Apply(nil, []string{"a", "b"}, nil)
	f.Add(`{"type":"counter","id":"u","kind":"approx","shards":2,"value":2,"sketches":["` + base64.StdEncoding.EncodeToString(one) + `",""]}` + "\n" + `{"type":"end","counters":1,"members":0}` + "\n")
	f.Fuzz(func(t *testing.T, body string) {
		d, err := transfer.NewDecoder(strings.NewReader(header2 + body))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		enc, _ := transfer.NewEncoder(&buf, "")
		for {
			rec, err := d.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				var le *transfer.LineError
				if !errors.As(err, &le) || le.Line < 2 {
					t.Fatalf("error %v is not a line error past the header", err)
				}
				return
			}
			switch {
			case rec.Counter != nil:
				enc.Counter(rec.Counter)
			case rec.Members != nil:
				enc.Members(rec.Members.ID, rec.Members.Members)
			case rec.Ranking != nil:
				enc.Ranking(rec.Ranking)
			case rec.Collection != nil:
				enc.Collection(rec.Collection)
			case rec.Document != nil:
				enc.Document(rec.Document)
			}
		}
		enc.Close()
		if err := decodeAll(buf.String()); err != nil {
			t.Fatalf("re-encoded export does not decode: %v", err)
		}
	})
}
