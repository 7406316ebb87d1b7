package http

import (
	"context"
	"errors"
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
		d.start(&c, parent, deadline)
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
		d.start(&c, parent, time.Now().Add(time.Hour))
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
		d.start(&c, parent, time.Now().Add(time.Hour))
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
		if c.listed {
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
	d.start(&c, parent, time.Now())
	<-c.Done()
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err() = %v, want DeadlineExceeded", c.Err())
	}
}
