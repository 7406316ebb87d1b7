package datastore_test

import (
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/datastore"
)

func TestParseDSN(t *testing.T) {
	for _, c := range []struct {
		dsn, project, kind, ns string
		interval               time.Duration
	}{
		{"datastore://demo-project", "demo-project", "", "", 0},
		{"datastore://p?kind=CounterShard", "p", "CounterShard", "", 0},
		{"DATASTORE://p?namespace=app-1&shard_write_interval=250ms", "p", "", "app-1", 250 * time.Millisecond},
		{"datastore://p/?shard_write_interval=0", "p", "", "", -1},
	} {
		cfg, err := datastore.ParseDSN(c.dsn)
		if err != nil || cfg.Project != c.project || cfg.Kind != c.kind || cfg.Namespace != c.ns || cfg.ShardWriteInterval != c.interval {
			t.Errorf("ParseDSN(%q) = %+v, %v", c.dsn, cfg, err)
		}
	}
	for _, bad := range []string{"datastore:p", "datastore://", "datastore://u:pw@p", "datastore://p:1", "datastore://p/db",
		"datastore://p?kind=", "datastore://p?kind=a.b", "datastore://p?kind=__x__", "datastore://p?kind=SC_Counter",
		"datastore://p?namespace=__n", "datastore://p?shard_write_interval=x", "datastore://p?shard_write_interval=-1s",
		"datastore://p?other=1", "datastore://p?kind=a&kind=b", "datastore://p q", "firestore://p"} {
		if _, err := datastore.ParseDSN(bad); shardcounter.ErrorCode(err) != shardcounter.EINVALID {
			t.Errorf("ParseDSN(%q) = %v, want invalid_argument", bad, err)
		}
	}
}

func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{"datastore://p", "datastore://p?kind=K&namespace=n&shard_write_interval=1s", "datastore://", "datastore://a:b@c", "datastore://p?kind=SC_x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := datastore.ParseDSN(s)
		if err != nil {
			if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
				t.Fatalf("ParseDSN(%q) = %v: errors must be invalid_argument", s, err)
			}
			return
		}
		if cfg.Project == "" || cfg.ShardWriteInterval > time.Hour {
			t.Fatalf("ParseDSN(%q) = %+v: no project, or an interval past 1h", s, cfg)
		}
	})
}
