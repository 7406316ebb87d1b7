package redis_test

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/redis"
)

func TestParseDSN(t *testing.T) {
	for _, c := range []struct {
		dsn  string
		want redis.DSN
	}{
		{"redis://localhost:6379", redis.DSN{Addrs: []string{"localhost:6379"}}},
		{"redis://127.0.0.1:7000/3", redis.DSN{Addrs: []string{"127.0.0.1:7000"}, DB: 3}},
		{"redis://:secret@h:1/", redis.DSN{Addrs: []string{"h:1"}, Password: "secret"}},
		{"redis://[::1]:6379", redis.DSN{Addrs: []string{"[::1]:6379"}}},
		{"redis+cluster://a:7000", redis.DSN{Cluster: true, Addrs: []string{"a:7000"}}},
		{"redis+cluster://u:p@a:7000?addr=b:7001&addr=c:7002", redis.DSN{Cluster: true, Addrs: []string{"a:7000", "b:7001", "c:7002"}, Username: "u", Password: "p"}},
		{"redis://h:1?wait_replicas=1", redis.DSN{Addrs: []string{"h:1"}, WaitReplicas: 1}},
		{"redis://h:1/2?wait_replicas=2&wait_timeout_ms=250", redis.DSN{Addrs: []string{"h:1"}, DB: 2, WaitReplicas: 2, WaitTimeout: 250 * time.Millisecond}},
		{"redis+cluster://a:1?wait_timeout_ms=60000&addr=b:2&wait_replicas=100", redis.DSN{Cluster: true, Addrs: []string{"a:1", "b:2"}, WaitReplicas: 100, WaitTimeout: time.Minute}},
	} {
		got, err := redis.ParseDSN(c.dsn)
		if err != nil {
			t.Errorf("ParseDSN(%q): %v", c.dsn, err)
			continue
		}
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("ParseDSN(%q) = %+v, want %+v", c.dsn, *got, c.want)
		}
	}
}

func TestParseDSNInvalid(t *testing.T) {
	for _, dsn := range []string{
		"", "localhost:6379", "redis://localhost", "redis://:6379", "redis://h:0", "redis://h:65536", "redis://h:x",
		"redis://h:1/x", "redis://h:1/-1", "redis://h:1/01", "redis://h:1?db=2", "redis://h:1#f",
		"rediss://h:1", "postgres://h:1", "redis+cluster://h:1/0", "redis+cluster://h:1?addr=b", "redis+cluster://h:1?node=b:2",
		"redis:h:1",
		"redis://h:1?wait_replicas=0", "redis://h:1?wait_replicas=-1", "redis://h:1?wait_replicas=01", "redis://h:1?wait_replicas=+1",
		"redis://h:1?wait_replicas=1.0", "redis://h:1?wait_replicas=", "redis://h:1?wait_replicas=101", "redis://h:1?wait_replicas=x",
		"redis://h:1?wait_replicas=1&wait_replicas=1", "redis://h:1?wait_timeout_ms=10", "redis://h:1?wait_replicas=1&wait_timeout_ms=0",
		"redis://h:1?wait_replicas=1&wait_timeout_ms=60001", "redis://h:1?wait_replicas=1&wait_timeout_ms=1s", "redis://h:1?Wait_Replicas=1",
		"redis+cluster://h:1?wait_replicas=1&wait_timeout_ms=5&wait_timeout_ms=5", "redis+cluster://h:1?wait=1",
	} {
		_, err := redis.ParseDSN(dsn)
		if !errors.Is(err, shardcounter.ErrInvalid) {
			t.Errorf("ParseDSN(%q) = %v, want ErrInvalid", dsn, err)
		}
	}
	_, err := redis.ParseDSN("redis://:hunter2@h")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %v should not show the password", err)
	}
}

func TestDSNString(t *testing.T) {
	d, err := redis.ParseDSN("redis+cluster://:hunter2@a:1?addr=b:2")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.String(), "redis+cluster://:xxxxx@a:1?addr=b:2"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{"redis://h:1/2", "redis+cluster://a:1?addr=b:2&addr=c:3", "redis://:p@h:1", "redis://h",
		"redis://h:1?wait_replicas=1&wait_timeout_ms=500", "redis+cluster://a:1?addr=b:2&wait_replicas=2", "redis://h:1?wait_timeout_ms=5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		d, err := redis.ParseDSN(dsn)
		if err != nil {
			if shardcounter.ErrorCode(err) != shardcounter.EINVALID {
				t.Fatalf("ParseDSN(%q) error code %q", dsn, shardcounter.ErrorCode(err))
			}
			return
		}
		if len(d.Addrs) == 0 || (!d.Cluster && len(d.Addrs) != 1) {
			t.Fatalf("ParseDSN(%q) = %+v", dsn, d)
		}
		if d.WaitReplicas < 0 || d.WaitReplicas > 100 || d.WaitTimeout < 0 || d.WaitTimeout > time.Minute || d.WaitTimeout%time.Millisecond != 0 ||
			(d.WaitTimeout != 0 && d.WaitReplicas == 0) {
			t.Fatalf("ParseDSN(%q) = %+v: wait parameters out of range", dsn, d)
		}
		for _, a := range d.Addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				t.Fatalf("ParseDSN(%q): addr %q: %v", dsn, a, err)
			}
		}
		again, err := redis.ParseDSN(d.String())
		if d.Password == "" && (err != nil || !reflect.DeepEqual(again, d)) {
			t.Fatalf("ParseDSN(String()) of %q = %+v, %v; want %+v", dsn, again, err, d)
		}
	})
}

// TestOpenUnreachable opens a DSN where nothing listens: it fails with
// ErrUnavailable, within the dial timeout.
func TestOpenUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, dsn := range []string{"redis://" + addr, "redis+cluster://" + addr} {
		start := time.Now()
		_, err := redis.Open(context.Background(), dsn, redis.Options{})
		if !errors.Is(err, shardcounter.ErrUnavailable) {
			t.Errorf("Open(%q) = %v, want ErrUnavailable", dsn, err)
		}
		if d := time.Since(start); d > 3*redis.DefaultDialTimeout {
			t.Errorf("Open(%q) took %v to fail", dsn, d)
		}
	}
}

// TestServerDown stops the server under a store: calls fail with
// ErrUnavailable, and the store works again once a server is back.
func TestServerDown(t *testing.T) {
	srv := MustStartServer(t)
	ctx := context.Background()
	s := MustOpen(t, serverDSN(srv))
	id := t.Name() + runID()
	if _, err := s.CreateCounter(ctx, id, shardcounter.Spec{Shards: 4}); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if err := s.Add(ctx, id, 1, 0); !errors.Is(err, shardcounter.ErrUnavailable) {
		t.Fatalf("Add with the server down: %v, want ErrUnavailable", err)
	}
	if _, err := s.ReadCounter(ctx, id); !errors.Is(err, shardcounter.ErrUnavailable) {
		t.Fatalf("ReadCounter with the server down: %v, want ErrUnavailable", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, shardcounter.ErrUnavailable) {
		t.Fatalf("Ping with the server down: %v, want ErrUnavailable", err)
	}
}

// TestNewInvalid checks that bad options and unusable clients are
// ErrInvalid, never a panic.
func TestNewInvalid(t *testing.T) {
	good := &goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}
	for _, c := range []struct {
		name   string
		client goredis.UniversalClient
		opts   redis.Options
	}{
		{"NilClient", nil, redis.Options{}},
		{"NilTypedClient", (*goredis.Client)(nil), redis.Options{}},
		{"NilClusterClient", (*goredis.ClusterClient)(nil), redis.Options{}},
		{"Retries", goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}), redis.Options{}},
		{"ClusterRedirects", goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRetries: -1}), redis.Options{}},
		{"NegativeTTL", goredis.NewClient(good), redis.Options{RequestIDTTL: -time.Second}},
		{"HashTagPrefix", goredis.NewClient(good), redis.Options{Prefix: "app:{x}:"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := redis.New(c.client, c.opts); !errors.Is(err, shardcounter.ErrInvalid) {
				t.Fatalf("New = %v, want ErrInvalid", err)
			}
		})
	}
	if _, err := redis.New(goredis.NewClient(good), redis.Options{}); err != nil {
		t.Fatalf("New with good options: %v", err)
	}
}
