package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBatchContext: a batch's context ends at its deadline, and the next
// batch's starts afresh, with a Done channel the last deadline did not
// close.
func TestBatchContext(t *testing.T) {
	var c batchContext
	c.start(time.Millisecond)
	select {
	case <-c.Done():
	case <-time.After(time.Minute):
		t.Fatal("the deadline passed and Done was not closed")
	}
	if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err after the deadline: %v", err)
	}
	c.stop()

	c.start(time.Hour)
	defer c.stop()
	if err := c.Err(); err != nil {
		t.Fatalf("Err of a fresh batch: %v", err)
	}
	select {
	case <-c.Done():
		t.Fatal("Done of a fresh batch is closed")
	default:
	}
	if d, ok := c.Deadline(); !ok || time.Until(d) < 30*time.Minute {
		t.Fatalf("Deadline of a batch of an hour: %v, %v", d, ok)
	}
	c.expire() // the last batch's timer, late: the deadline is ahead
	if err := c.Err(); err != nil {
		t.Fatalf("a late timer ended the batch after it: %v", err)
	}
}
