package http_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

func TestClient(t *testing.T) {
	ctx := context.Background()
	e := MustServe(t, EnvOptions{})
	c := e.Client

	created, _, err := c.CreateCounter(ctx, "likes/post 1", shardcounter.CreateOptions{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	if created.ID != "likes/post 1" || created.Shards != 4 {
		t.Fatalf("created %+v", created)
	}
	res, err := c.WriteCounter(ctx, shardcounter.Write{Counter: "likes/post 1", Delta: 10, RequestID: "r1"})
	if err != nil || !res.Applied {
		t.Fatalf("increment: %+v, %v", res, err)
	}
	res, err = c.WriteCounter(ctx, shardcounter.Write{Counter: "likes/post 1", Delta: 10, RequestID: "r1"})
	if err != nil || res.Applied || !res.Duplicate {
		t.Fatalf("repeat: %+v, %v; want a duplicate", res, err)
	}
	if _, err := c.WriteCounter(ctx, shardcounter.Write{Counter: "likes/post 1", Delta: -3}); err != nil {
		t.Fatal(err)
	}
	reading, err := c.ReadCounter(ctx, "likes/post 1", shardcounter.Strong)
	if err != nil {
		t.Fatal(err)
	}
	if reading.Value != 7 || reading.Shards != 4 || reading.Consistency != shardcounter.Strong {
		t.Fatalf("reading %+v, want 7 over 4 shards", reading)
	}
	resharded, err := c.ReshardCounter(ctx, "likes/post 1", 9)
	if err != nil || resharded.Shards != 9 {
		t.Fatalf("reshard: %+v, %v", resharded, err)
	}
	results, err := c.WriteBatch(ctx, []shardcounter.Write{{Counter: "likes/post 1", Delta: 1}, {Counter: "other", Delta: -1}})
	if err != nil || len(results) != 2 || !results[0].Applied || !results[1].Applied {
		t.Fatalf("batch: %+v, %v", results, err)
	}
	if got := e.MustValue(t, "likes/post 1"); got != 8 {
		t.Fatalf("value %d, want 8", got)
	}
	if err := c.DeleteCounter(ctx, "likes/post 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadCounter(ctx, "likes/post 1", ""); !errors.Is(err, shardcounter.ErrNotFound) {
		t.Fatalf("read after delete: %v, want ErrNotFound", err)
	}

	t.Run("MinInt64", func(t *testing.T) {
		e.MustCreate(t, "min", 1)
		if _, err := c.WriteCounter(ctx, shardcounter.Write{Counter: "min", Delta: math.MinInt64}); err != nil {
			t.Fatal(err)
		}
		if got := e.MustValue(t, "min"); got != math.MinInt64 {
			t.Fatalf("value %d, want MinInt64", got)
		}
		_, err := c.WriteCounter(ctx, shardcounter.Write{Counter: "min", Delta: math.MinInt64})
		if !errors.Is(err, shardcounter.ErrOutOfRange) {
			t.Fatalf("second MinInt64: %v, want ErrOutOfRange", err)
		}
	})
}

// TestClientErrors checks that the client returns exactly the code and
// message of the server's error body.
func TestClientErrors(t *testing.T) {
	ctx := context.Background()
	e := MustServe(t, EnvOptions{NoAutoCreate: true})
	e.MustCreate(t, "exists", 2)

	raw := e.Do(t, "PUT", path("exists"), `{}`)
	var body shttp.ErrorResponse
	if err := json.Unmarshal(raw.Body, &body); err != nil {
		t.Fatal(err)
	}
	_, _, err := e.Client.CreateCounter(ctx, "exists", shardcounter.CreateOptions{})
	var se *shardcounter.Error
	if !errors.As(err, &se) || se.Code != body.Error.Code || se.Message != body.Error.Message {
		t.Fatalf("client error %#v, want code %q message %q", err, body.Error.Code, body.Error.Message)
	}

	for name, call := range map[string]func() error{
		"ErrNotFound": func() error {
			_, err := e.Client.WriteCounter(ctx, shardcounter.Write{Counter: "ghost", Delta: 1})
			return err
		},
		"ErrNotFoundReshard": func() error { _, err := e.Client.ReshardCounter(ctx, "ghost", 2); return err },
		"ErrNotFoundDelete":  func() error { return e.Client.DeleteCounter(ctx, "ghost") },
	} {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, shardcounter.ErrNotFound) {
				t.Fatalf("got %v, want ErrNotFound", err)
			}
		})
	}
	t.Run("ErrInvalid", func(t *testing.T) {
		for _, err := range []error{
			func() error { _, _, err := e.Client.CreateCounter(ctx, "", shardcounter.CreateOptions{}); return err }(),
			func() error {
				_, _, err := e.Client.CreateCounter(ctx, "x", shardcounter.CreateOptions{Shards: 2000})
				return err
			}(),
			func() error {
				_, err := e.Client.WriteCounter(ctx, shardcounter.Write{Counter: "exists", Delta: 0})
				return err
			}(),
			func() error { _, err := e.Client.ReshardCounter(ctx, "exists", 0); return err }(),
			func() error { _, err := e.Client.ReadCounter(ctx, "exists", "eventual"); return err }(),
			func() error {
				_, err := e.Client.ListCounters(ctx, shardcounter.ListOptions{Limit: 5000})
				return err
			}(),
		} {
			if !errors.Is(err, shardcounter.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		}
	})
	t.Run("ErrUnavailable", func(t *testing.T) {
		ts := httptest.NewServer(http.NotFoundHandler())
		url := ts.URL
		ts.Close()
		c := shttp.NewClient(url)
		if _, err := c.ReadCounter(ctx, "x", ""); !errors.Is(err, shardcounter.ErrUnavailable) {
			t.Fatalf("read from a closed server: %v, want ErrUnavailable", err)
		}
		_, err := c.WriteCounter(ctx, shardcounter.Write{Counter: "x", Delta: 1})
		if !errors.Is(err, shardcounter.ErrUnavailable) || shardcounter.IsOutcomeUnknown(err) {
			t.Fatalf("write to a closed server: %#v, want ErrUnavailable, not applied", err)
		}
	})
	t.Run("NoErrorBody", func(t *testing.T) {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad gateway", http.StatusBadGateway)
		}))
		defer ts.Close()
		_, err := shttp.NewClient(ts.URL).ReadCounter(ctx, "x", "")
		if !errors.Is(err, shardcounter.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable from a 502", err)
		}
	})
}

// TestConcurrentClients checks that concurrent increments and decrements
// through the client all count: the final strong read is the net total.
func TestConcurrentClients(t *testing.T) {
	ctx := context.Background()
	e := MustServe(t, EnvOptions{})
	e.MustCreate(t, "hot", 8)
	const workers, perWorker = 50, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				delta := int64(w%5 + 1)
				if i%4 == 3 {
					delta = -delta
				}
				if _, err := e.Client.WriteCounter(ctx, shardcounter.Write{Counter: "hot", Delta: delta}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var want int64
	for w := range workers {
		for i := range perWorker {
			delta := int64(w%5 + 1)
			if i%4 == 3 {
				delta = -delta
			}
			want += delta
		}
	}
	if got := e.MustValue(t, "hot"); got != want {
		t.Fatalf("value %d, want %d", got, want)
	}
}

func TestClientCanceled(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.Client.WriteCounter(ctx, shardcounter.Write{Counter: "x", Delta: 1})
	var se *shardcounter.Error
	if !errors.As(err, &se) || !strings.Contains(se.Message, "gave up") {
		t.Fatalf("got %v, want an error saying the caller gave up", err)
	}
	if !shardcounter.IsOutcomeUnknown(err) {
		t.Fatalf("a cancelled write must report its outcome as unknown: %#v", err)
	}
}
