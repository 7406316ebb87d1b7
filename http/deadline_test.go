package http

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestDeadlineContext checks that a request's deadlineContext behaves as
// context.WithTimeout's would: it ends at its deadline with
// DeadlineExceeded, with its parent with the parent's error, and with
// Canceled when the request is done; it carries its parent's values;
// contexts derived from it end with it; AfterFunc's stop works.
func TestDeadlineContext(t *testing.T) {
	var d deadlineWatcher
	type key struct{}
	parentOf := func() (context.Context, context.CancelFunc) {
		return context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	}

	t.Run("deadline", func(t *testing.T) {
		parent, cancelParent := parentOf()
		defer cancelParent()
		var c deadlineContext
		deadline := time.Now().Add(30 * time.Millisecond)
		d.start(&c, parent, deadline, nil, time.Time{})
		defer d.stop(&c)
		if got, ok := c.Deadline(); !ok || !got.Equal(deadline) {
			t.Fatalf("Deadline() = %v, %v, want %v, true", got, ok, deadline)
		}
		if c.Value(key{}) != "v" {
			t.Fatalf("Value = %v, want the parent's", c.Value(key{}))
		}
		if c.Err() != nil {
			t.Fatalf("Err() before the deadline = %v", c.Err())
		}
		<-c.Done()
		if time.Now().Before(deadline) {
			t.Fatalf("done before its deadline %v", deadline)
		}
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err() = %v, want DeadlineExceeded", c.Err())
		}
	})

	t.Run("parent", func(t *testing.T) {
		parent, cancelParent := parentOf()
		var c deadlineContext
		d.start(&c, parent, time.Now().Add(time.Hour), nil, time.Time{})
		defer d.stop(&c)
		done := c.Done()
		cancelParent()
		<-done
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("Err() = %v, want the parent's Canceled", c.Err())
		}
	})

	t.Run("stop", func(t *testing.T) {
		parent, cancelParent := parentOf()
		defer cancelParent()
		var c deadlineContext
		d.start(&c, parent, time.Now().Add(time.Hour), nil, time.Time{})
		child, cancelChild := context.WithCancel(&c) // through AfterFunc
		defer cancelChild()
		called := make(chan struct{})
		stopped := c.AfterFunc(func() { t.Error("a stopped AfterFunc ran") })
		c.AfterFunc(func() { close(called) })
		if !stopped() || stopped() {
			t.Fatal("stop did not report true once, then false")
		}
		d.stop(&c)
		<-c.Done()
		<-child.Done()
		<-called
		if !errors.Is(c.Err(), context.Canceled) || !errors.Is(child.Err(), context.Canceled) {
			t.Fatalf("Err() = %v, the child's %v: want Canceled", c.Err(), child.Err())
		}
		if c.list != nil {
			t.Fatal("a stopped context is still watched")
		}
		ran := make(chan struct{})
		if c.AfterFunc(func() { close(ran) })() {
			t.Fatal("stop of an AfterFunc of a canceled context reported true")
		}
		<-ran
	})

	// Once nothing is in flight the watcher's goroutine ends, and a new
	// request starts it again.
	for {
		d.mu.Lock()
		running := d.running
		d.mu.Unlock()
		if !running {
			break
		}
		time.Sleep(time.Millisecond)
	}
	parent, cancelParent := parentOf()
	defer cancelParent()
	var c deadlineContext
	d.start(&c, parent, time.Now(), nil, time.Time{})
	<-c.Done()
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err() = %v, want DeadlineExceeded", c.Err())
	}
}

// readDeadlines is a ResponseWriter that records the read deadlines set
// on its connection.
type readDeadlines struct {
	http.ResponseWriter
	mu  sync.Mutex
	set []time.Time
}

func (w *readDeadlines) SetReadDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.set = append(w.set, t)
	return nil
}

func (w *readDeadlines) cuts() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, t := range w.set {
		if !t.After(time.Now()) {
			n++
		}
	}
	if n != len(w.set) {
		panic("a read deadline in the future")
	}
	return n
}

// TestBodyDeadline checks that the watcher cuts the connection's reads of
// a body still arriving at its deadline, also past the request's own
// deadline, and leaves alone a body that is in before it.
func TestBodyDeadline(t *testing.T) {
	var d deadlineWatcher
	waitCut := func(w *readDeadlines) {
		for w.cuts() == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	t.Run("late", func(t *testing.T) {
		var c deadlineContext
		w := &readDeadlines{}
		body := time.Now().Add(30 * time.Millisecond)
		d.start(&c, context.Background(), time.Now().Add(time.Hour), w, body)
		defer d.stop(&c)
		waitCut(w)
		if time.Now().Before(body) {
			t.Fatal("reads cut before the body's deadline")
		}
		if !d.bodyRead(&c) {
			t.Fatal("bodyRead after the cut says the body was in time")
		}
		if c.Err() != nil {
			t.Fatalf("the request's context ended with its body: %v", c.Err())
		}
	})
	t.Run("past the request's deadline", func(t *testing.T) {
		var c deadlineContext
		w := &readDeadlines{}
		body := time.Now().Add(60 * time.Millisecond)
		d.start(&c, context.Background(), time.Now().Add(10*time.Millisecond), w, body)
		defer d.stop(&c)
		<-c.Done()
		if w.cuts() != 0 {
			t.Fatal("reads cut at the request's deadline, before the body's")
		}
		waitCut(w)
		if time.Now().Before(body) {
			t.Fatal("reads cut before the body's deadline")
		}
		if !d.bodyRead(&c) {
			t.Fatal("bodyRead after the cut says the body was in time")
		}
	})
	t.Run("in time", func(t *testing.T) {
		var c deadlineContext
		w := &readDeadlines{}
		d.start(&c, context.Background(), time.Now().Add(time.Hour), w, time.Now().Add(20*time.Millisecond))
		if d.bodyRead(&c) {
			t.Fatal("a body in at once is late")
		}
		time.Sleep(60 * time.Millisecond) // past the body's deadline: nothing to cut
		d.stop(&c)
		if n := w.cuts(); n != 0 {
			t.Fatalf("reads cut %d times after the body was in", n)
		}
	})
}
