package http_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

func TestIncrementDecrement(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	e.MustCreate(t, "c", 4)
	t.Run("OK", func(t *testing.T) {
		var wr shardcounter.WriteResult
		e.Do(t, "POST", path("c")+"/increment", "").MustOK(t, http.StatusOK, &wr)
		if wr != (shardcounter.WriteResult{Counter: "c", Applied: true}) {
			t.Fatalf("got %+v", wr)
		}
		if got, want := string(e.Do(t, "POST", path("c")+"/increment", `{"by":10}`).Body), `{"counter":"c","applied":true}`+"\n"; got != want {
			t.Fatalf("body %q, want %q", got, want)
		}
		e.Do(t, "POST", path("c")+"/decrement", `{"by":4}`).MustOK(t, http.StatusOK, nil)
		e.Do(t, "POST", path("c")+"/decrement", `{}`).MustOK(t, http.StatusOK, nil)
		if got := e.MustValue(t, "c"); got != 1+10-4-1 {
			t.Fatalf("value %d, want 6", got)
		}
	})
	t.Run("Duplicate", func(t *testing.T) {
		before := e.MustValue(t, "c")
		var first, second shardcounter.WriteResult
		e.Do(t, "POST", path("c")+"/increment", `{"by":5,"request_id":"r-1"}`).MustOK(t, http.StatusOK, &first)
		e.Do(t, "POST", path("c")+"/increment", `{"by":5,"request_id":"r-1"}`).MustOK(t, http.StatusOK, &second)
		if !first.Applied || first.Duplicate {
			t.Fatalf("first %+v, want applied", first)
		}
		if second.Applied || !second.Duplicate {
			t.Fatalf("second %+v, want a duplicate", second)
		}
		if got := string(e.Do(t, "POST", path("c")+"/decrement", `{"by":5,"request_id":"r-1"}`).Body); got != `{"counter":"c","applied":false,"duplicate":true}`+"\n" {
			t.Fatalf("body %s", got)
		}
		if got, want := e.MustValue(t, "c"), before+5; got != want {
			t.Fatalf("value %d, want %d", got, want)
		}
	})
	t.Run("ErrBy", func(t *testing.T) {
		before := e.MustValue(t, "c")
		for _, body := range []string{
			`{"by":0}`, `{"by":-1}`, `{"by":1.5}`, `{"by":"5"}`, `{"by":9223372036854775808}`,
			`{"by":null,"x":1}`, `{"request_id":""}x`, `{"request_id":"a\u0001b"}`,
			`{"request_id":"` + strings.Repeat("r", 257) + `"}`, `{"delta":5}`,
		} {
			for _, op := range []string{"/increment", "/decrement"} {
				e.Do(t, "POST", path("c")+op, body).MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
			}
		}
		if got := e.MustValue(t, "c"); got != before {
			t.Fatalf("value %d after bad writes, want %d", got, before)
		}
	})
	t.Run("ErrOutOfRange", func(t *testing.T) {
		e.MustCreate(t, "big", 1)
		e.Do(t, "POST", path("big")+"/increment", fmt.Sprintf(`{"by":%d}`, int64(math.MaxInt64))).MustOK(t, http.StatusOK, nil)
		e.Do(t, "POST", path("big")+"/increment", `{"by":1}`).MustError(t, http.StatusBadRequest, shardcounter.EOUTOFRANGE)
		if got := e.MustValue(t, "big"); got != math.MaxInt64 {
			t.Fatalf("value %d, want MaxInt64", got)
		}
	})
	t.Run("AutoCreate", func(t *testing.T) {
		e.Do(t, "POST", path("fresh")+"/decrement", `{"by":2}`).MustOK(t, http.StatusOK, nil)
		if got := e.MustValue(t, "fresh"); got != -2 {
			t.Fatalf("value %d, want -2", got)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		e := MustServe(t, EnvOptions{NoAutoCreate: true})
		e.Do(t, "POST", path("ghost")+"/increment", `{}`).MustError(t, http.StatusNotFound, shardcounter.ENOTFOUND)
		e.Do(t, "GET", path("ghost"), "").MustError(t, http.StatusNotFound, shardcounter.ENOTFOUND)
	})
}

func TestWrites(t *testing.T) {
	e := MustServe(t, EnvOptions{Server: shttp.ServerOptions{MaxBatch: 5}})
	e.MustCreate(t, "w1", 4)
	e.MustCreate(t, "w2", 4)
	t.Run("OK", func(t *testing.T) {
		var resp shttp.WritesResponse
		e.Do(t, "POST", "/v1/writes", `{"writes":[
			{"counter":"w1","delta":5},
			{"counter":"w2","delta":-3,"request_id":"b-1"},
			{"counter":"w2","delta":-3,"request_id":"b-1"},
			{"counter":"w1","delta":-1}]}`).MustOK(t, http.StatusOK, &resp)
		want := []shardcounter.WriteResult{
			{Counter: "w1", Applied: true},
			{Counter: "w2", Applied: true},
			{Counter: "w2", Duplicate: true},
			{Counter: "w1", Applied: true},
		}
		if fmt.Sprint(resp.Results) != fmt.Sprint(want) {
			t.Fatalf("results %+v, want %+v", resp.Results, want)
		}
		if got := e.MustValue(t, "w1"); got != 4 {
			t.Fatalf("w1 %d, want 4", got)
		}
		if got := e.MustValue(t, "w2"); got != -3 {
			t.Fatalf("w2 %d, want -3", got)
		}
	})
	t.Run("ErrInvalidItem", func(t *testing.T) {
		for _, body := range []string{
			`{"writes":[{"counter":"w1","delta":1},{"counter":"w1","delta":0}]}`,
			`{"writes":[{"counter":"w1","delta":1},{"counter":"","delta":1}]}`,
			`{"writes":[{"counter":"w1","delta":1},{"counter":"w1","delta":1,"extra":true}]}`,
			`{"writes":[{"counter":"w1","delta":1},{"counter":"w1","delta":1.5}]}`,
			`{"writes":[{"counter":"w1","delta":1},{"counter":"w1","delta":1,"request_id":"a\nb"}]}`,
			`{"writes":[{"counter":"w1","delta":1},null]}`,
			`{"writes":[]}`, `{}`, ``, `{"writes":{}}`,
		} {
			e.Do(t, "POST", "/v1/writes", body).MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
		}
		if got := e.MustValue(t, "w1"); got != 4 {
			t.Fatalf("w1 %d after refused batches, want 4", got)
		}
		msg := e.Do(t, "POST", "/v1/writes", `{"writes":[{"counter":"w1","delta":1},{"counter":"w1","delta":0}]}`).
			MustError(t, http.StatusBadRequest, shardcounter.EINVALID)
		if !strings.Contains(msg, "writes[1]") {
			t.Fatalf("message %q does not name the bad item", msg)
		}
	})
	t.Run("ErrBatchTooLarge", func(t *testing.T) {
		items := strings.Repeat(`{"counter":"w1","delta":1},`, 6)
		e.Do(t, "POST", "/v1/writes", `{"writes":[`+strings.TrimSuffix(items, ",")+`]}`).
			MustError(t, http.StatusRequestEntityTooLarge, shardcounter.ETOOLARGE)
		if got := e.MustValue(t, "w1"); got != 4 {
			t.Fatalf("w1 %d after refused batch, want 4", got)
		}
	})
	t.Run("PerItemError", func(t *testing.T) {
		e := MustServe(t, EnvOptions{NoAutoCreate: true})
		e.MustCreate(t, "here", 2)
		var resp shttp.WritesResponse
		e.Do(t, "POST", "/v1/writes", `{"writes":[{"counter":"here","delta":2},{"counter":"gone","delta":1}]}`).
			MustOK(t, http.StatusOK, &resp)
		if r := resp.Results[0]; !r.Applied || r.Error != nil {
			t.Fatalf("first %+v, want applied", r)
		}
		if r := resp.Results[1]; r.Applied || r.Error == nil || r.Error.Code != shardcounter.ENOTFOUND || r.Error.Message == "" {
			t.Fatalf("second %+v, want a not_found error", r)
		}
		if got := e.MustValue(t, "here"); got != 2 {
			t.Fatalf("value %d, want 2", got)
		}
		// The client carries the item's error as a *shardcounter.Error.
		results, err := e.Client.WriteBatch(context.Background(), []shardcounter.Write{{Counter: "gone", Delta: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(results[0].Error, shardcounter.ErrNotFound) {
			t.Fatalf("client result %+v, want ErrNotFound", results[0])
		}
	})
}

// TestConcurrentDuplicates retries one write with one request id from
// many goroutines at once: it counts exactly once.
func TestConcurrentDuplicates(t *testing.T) {
	e := MustServe(t, EnvOptions{})
	e.MustCreate(t, "once", 4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Client.WriteCounter(context.Background(), shardcounter.Write{Counter: "once", Delta: 7, RequestID: "retry-me"})
			if err != nil {
				t.Error(err)
				return
			}
			if res.Applied {
				mu.Lock()
				applied++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if applied != 1 {
		t.Fatalf("%d writes applied, want 1", applied)
	}
	if got := e.MustValue(t, "once"); got != 7 {
		t.Fatalf("value %d, want 7", got)
	}
}

// TestAsyncAccepted checks that a server whose writes are answered once
// queued says so with 202 Accepted: the write is not yet applied.
func TestAsyncAccepted(t *testing.T) {
	e := MustServe(t, EnvOptions{Async: true})
	e.MustCreate(t, "a", 2)
	var wr shardcounter.WriteResult
	e.Do(t, "POST", path("a")+"/increment", `{"by":2}`).MustOK(t, http.StatusAccepted, &wr)
	if !wr.Applied {
		t.Fatalf("got %+v, want applied (accepted)", wr)
	}
	e.Do(t, "POST", path("a")+"/decrement", ``).MustOK(t, http.StatusAccepted, nil)
	var resp shttp.WritesResponse
	e.Do(t, "POST", "/v1/writes", `{"writes":[{"counter":"a","delta":5}]}`).MustOK(t, http.StatusAccepted, &resp)
	if _, err := e.Client.WriteCounter(context.Background(), shardcounter.Write{Counter: "a", Delta: 1}); err != nil {
		t.Fatal(err)
	}
	// A member write too, which cannot yet say whether it changed anything.
	e.Do(t, "PUT", path("likes"), `{"kind":"distinct"}`).MustOK(t, http.StatusCreated, nil)
	var m shttp.MemberResponse
	e.Do(t, "PUT", path("likes")+"/members/alice", "").MustOK(t, http.StatusAccepted, &m)
	if m.Counter != "likes" || m.Member != "alice" || m.Added != nil {
		t.Fatalf("async member add: %+v, want no added", m)
	}
	// Reads and creates are not writes that wait: their statuses stay.
	e.Do(t, "GET", path("a"), "").MustOK(t, http.StatusOK, nil)
	e.Do(t, "PUT", path("b"), "").MustOK(t, http.StatusCreated, nil)
	// Accepted writes commit within the flush interval.
	for start := time.Now(); e.MustValue(t, "a") != 7; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("value %d, want 7 once the accepted writes commit", e.MustValue(t, "a"))
		}
	}
	// A durable server answers 200: the write is applied.
	d := MustServe(t, EnvOptions{})
	d.Do(t, "POST", path("a")+"/increment", ``).MustOK(t, http.StatusOK, nil)
	d.Do(t, "POST", "/v1/writes", `{"writes":[{"counter":"a","delta":5}]}`).MustOK(t, http.StatusOK, nil)
}
