package shardcounter_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

func TestValidateRanking(t *testing.T) {
	ok := []shardcounter.RankingOptions{
		{Prefix: "post:"},
		{Prefix: "", Size: shardcounter.MaxRankingSize},
		{Prefix: "tag:", Last: shardcounter.Duration(time.Hour), Size: 100},
		{Prefix: "x", MaxStaleness: shardcounter.Duration(10 * time.Millisecond)},
	}
	for _, o := range ok {
		if err := shardcounter.ValidateRanking("top", o); err != nil {
			t.Errorf("ValidateRanking(%+v) = %v, want nil", o, err)
		}
	}
	bad := []struct {
		name string
		o    shardcounter.RankingOptions
		want string
	}{
		{"", shardcounter.RankingOptions{}, "empty"},
		{"a\x01", shardcounter.RankingOptions{}, "control"},
		{"top", shardcounter.RankingOptions{Size: shardcounter.MaxRankingSize + 1}, "size"},
		{"top", shardcounter.RankingOptions{Size: -1}, "size"},
		{"top", shardcounter.RankingOptions{Last: shardcounter.Duration(90 * time.Second)}, "minutes"},
		{"top", shardcounter.RankingOptions{Last: shardcounter.Duration(8 * 24 * time.Hour)}, "longer"},
		{"top", shardcounter.RankingOptions{MaxStaleness: shardcounter.Duration(time.Millisecond)}, "max_staleness"},
		{"top", shardcounter.RankingOptions{Prefix: "p\n"}, "prefix"},
	}
	for _, b := range bad {
		err := shardcounter.ValidateRanking(b.name, b.o)
		if shardcounter.ErrorCode(err) != shardcounter.EINVALID || !strings.Contains(err.Error(), b.want) {
			t.Errorf("ValidateRanking(%q, %+v) = %v, want invalid_argument mentioning %q", b.name, b.o, err, b.want)
		}
	}
}

func TestRankingOptionsJSON(t *testing.T) {
	var o shardcounter.RankingOptions
	if err := json.Unmarshal([]byte(`{"prefix":"tag:","last":"1h","size":100}`), &o); err != nil {
		t.Fatal(err)
	}
	o = o.WithDefaults()
	want := shardcounter.RankingOptions{Prefix: "tag:", Last: shardcounter.Duration(time.Hour), Size: 100, MaxStaleness: shardcounter.DefaultMaxStaleness}
	if o != want {
		t.Fatalf("decoded %+v, want %+v", o, want)
	}
	b, _ := json.Marshal(shardcounter.Ranking{Name: "n", RankingOptions: o})
	if !strings.Contains(string(b), `"last":"1h"`) || !strings.Contains(string(b), `"max_staleness":"1s"`) {
		t.Fatalf("encoded %s", b)
	}
}

// FuzzRankingOptions feeds PUT bodies through decoding and validation: a
// body is refused with invalid_argument or accepted with options whose
// defaults stay valid and survive a JSON round trip.
func FuzzRankingOptions(f *testing.F) {
	f.Add("top", `{"prefix":"post:","size":1000}`)
	f.Add("trending", `{"prefix":"tag:","last":"1h","size":100,"max_staleness":"250ms"}`)
	f.Add("x", `{"last":"90s"}`)
	f.Add("", `{"size":-3}`)
	f.Fuzz(func(t *testing.T, name, body string) {
		var o shardcounter.RankingOptions
		if err := json.Unmarshal([]byte(body), &o); err != nil {
			return
		}
		err := shardcounter.ValidateRanking(name, o)
		if err != nil {
			if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
				t.Fatalf("ValidateRanking: %v is not invalid_argument", err)
			}
			return
		}
		d := o.WithDefaults()
		if err := shardcounter.ValidateRanking(name, d); err != nil {
			t.Fatalf("defaults of valid %+v are invalid: %v", o, err)
		}
		if d.Size < 1 || d.Size > shardcounter.MaxRankingSize || d.MaxStaleness <= 0 {
			t.Fatalf("defaults %+v out of range", d)
		}
		b, err := json.Marshal(shardcounter.Ranking{Name: name, RankingOptions: d})
		if err != nil {
			t.Fatal(err)
		}
		var back shardcounter.Ranking
		if err := json.Unmarshal(b, &back); err != nil || back.Name != name || !back.SameOptions(d) {
			t.Fatalf("round trip of %+v: %+v, %v", d, back, err)
		}
	})
}
