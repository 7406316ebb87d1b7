package shardcounter_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
)

func TestIndexValue(t *testing.T) {
	same := [][]any{
		{1.0, 1, int64(1), json.Number("1"), json.Number("1.0"), float32(1)},
		{0.0, json.Number("-0")},
		{"USD"},
		{true},
	}
	for _, group := range same {
		want, ok := shardcounter.IndexValue(group[0])
		if !ok {
			t.Fatalf("IndexValue(%#v) not indexable", group[0])
		}
		for _, v := range group[1:] {
			if got, ok := shardcounter.IndexValue(v); !ok || got != want {
				t.Errorf("IndexValue(%#v) = %q, %v; want %q like %#v", v, got, ok, want, group[0])
			}
		}
	}
	distinct := []any{"1", 1, true, "true", false, "", 2.5}
	seen := make(map[string]any)
	for _, v := range distinct {
		iv, ok := shardcounter.IndexValue(v)
		if !ok {
			t.Fatalf("IndexValue(%#v) not indexable", v)
		}
		if prev, dup := seen[iv]; dup {
			t.Errorf("IndexValue(%#v) = IndexValue(%#v) = %q", v, prev, iv)
		}
		seen[iv] = v
	}
	for _, v := range []any{nil, map[string]any{}, []any{1}, json.Number("x")} {
		if iv, ok := shardcounter.IndexValue(v); ok {
			t.Errorf("IndexValue(%#v) = %q, want not indexable", v, iv)
		}
	}
}

func TestLookup(t *testing.T) {
	data := map[string]any{"price": map[string]any{"currency": "USD"}, "exchange": "EXCHG1", "a.b": 1}
	for path, want := range map[string]any{"price.currency": "USD", "exchange": "EXCHG1"} {
		if got, ok := shardcounter.Lookup(data, path); !ok || got != want {
			t.Errorf("Lookup(%q) = %v, %v; want %v", path, got, ok, want)
		}
	}
	for _, path := range []string{"price.micros", "exchange.x", "nothing", "a.b"} {
		if got, ok := shardcounter.Lookup(data, path); ok {
			t.Errorf("Lookup(%q) = %v, want absent", path, got)
		}
	}
}

func TestValidateCollection(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		c := &shardcounter.Collection{Name: "instruments"}
		if err := shardcounter.ValidateCollection(c); err != nil {
			t.Fatal(err)
		}
		if c.Shards != 1 || c.TimestampField != "timestamp" || c.ShardKey != shardcounter.ShardRandom || c.Indexes == nil {
			t.Fatalf("defaults = %+v", c)
		}
	})
	bad := map[string]shardcounter.Collection{
		"EmptyName":      {},
		"TooManyShards":  {Name: "c", Shards: shardcounter.MaxShards + 1},
		"NegativeShards": {Name: "c", Shards: -1},
		"ShardKey":       {Name: "c", ShardKey: "round_robin"},
		"EmptySegment":   {Name: "c", Indexes: []string{"price..currency"}},
		"TrailingDot":    {Name: "c", Indexes: []string{"price."}},
		"Duplicate":      {Name: "c", Indexes: []string{"a", "a"}},
		"TimestampIndex": {Name: "c", Indexes: []string{"timestamp"}},
		"TooMany":        {Name: "c", Indexes: strings.Split("a b c d e f g h i j k l m n o p q", " ")},
		"LongPath":       {Name: "c", Indexes: []string{strings.Repeat("x", shardcounter.MaxFieldPathLen+1)}},
		"ControlChar":    {Name: "c", TimestampField: "t\x01"},
	}
	for name, c := range bad {
		t.Run(name, func(t *testing.T) {
			if err := shardcounter.ValidateCollection(&c); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
				t.Fatalf("ValidateCollection(%+v) = %v, want invalid_argument", c, err)
			}
		})
	}
}

func TestValidateQuery(t *testing.T) {
	c := &shardcounter.Collection{Name: "instruments", Indexes: []string{"exchange", "price.currency"}}
	if err := shardcounter.ValidateCollection(c); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, q := range map[string]shardcounter.Query{
		"NegativeLimit": {Limit: -1},
		"LimitTooLarge": {Limit: shardcounter.MaxQueryLimit + 1},
		"Order":         {Order: "newest"},
		"EmptyRange":    {After: t0, Before: t0},
		"Inverted":      {After: t0.Add(time.Second), Before: t0},
		"TwoFilters":    {Where: []shardcounter.Filter{{"exchange", "==", "a"}, {"exchange", "==", "b"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := shardcounter.ValidateQueryShape(q); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
				t.Fatalf("ValidateQueryShape(%+v) = %v, want invalid_argument", q, err)
			}
		})
	}
	for name, f := range map[string]shardcounter.Filter{
		"Unindexed":   {"symbol", "==", "AAA"},
		"Op":          {"exchange", ">", "A"},
		"Timestamp":   {"timestamp", "==", "2019-01-01T00:00:00Z"},
		"ObjectValue": {"exchange", "==", map[string]any{}},
		"NullValue":   {"exchange", "==", nil},
		"LongValue":   {"exchange", "==", strings.Repeat("x", shardcounter.MaxIndexValueLen)},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := shardcounter.ValidateFilter(c, f); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
				t.Fatalf("ValidateFilter(%+v) = %v, want invalid_argument", f, err)
			}
		})
	}
	_, _, err := shardcounter.ValidateFilter(c, shardcounter.Filter{Field: "symbol", Op: "==", Value: "AAA"})
	if err == nil || !strings.Contains(err.Error(), `add "symbol" to the collection's indexes`) {
		t.Fatalf("filter on an undeclared field: %v, want a message naming the index to add", err)
	}
	if f, v, err := shardcounter.ValidateFilter(c, shardcounter.Filter{Field: "price.currency", Op: "==", Value: "USD"}); err != nil || f != "price.currency" || v != "sUSD" {
		t.Fatalf("ValidateFilter(price.currency == USD) = %q, %q, %v", f, v, err)
	}
}

func TestParseTimestamp(t *testing.T) {
	got, err := shardcounter.ParseTimestamp("2019-01-01T15:45:23.010123456+02:00")
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2019, 1, 1, 13, 45, 23, 10123000, time.UTC); !got.Equal(want) || got.Location() != time.UTC {
		t.Fatalf("ParseTimestamp = %v, want %v in UTC, kept to the microsecond", got, want)
	}
	for _, bad := range []string{"", "2019-01-01", "yesterday", "2019-01-01 13:45:23Z"} {
		if _, err := shardcounter.ParseTimestamp(bad); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Errorf("ParseTimestamp(%q) = %v, want invalid_argument", bad, err)
		}
	}
}
