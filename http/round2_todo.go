package http

// This file holds the round-2 client methods that are not written yet.
// Each returns an internal error that says so. It is removed when the last
// one is implemented.

import (
	"context"
	"time"

	"github.com/shardcounter/shardcounter"
)

func notYet(what string) error {
	return shardcounter.Errorf(shardcounter.EINTERNAL, "http client: %s is not implemented yet", what)
}

// GetCounter is not implemented yet.
func (c *Client) GetCounter(ctx context.Context, id string) (*shardcounter.Counter, error) {
	return nil, notYet("GetCounter")
}

// ReadCounters is not implemented yet.
func (c *Client) ReadCounters(ctx context.Context, ids []string, cons shardcounter.Consistency) ([]shardcounter.ReadResult, error) {
	return nil, notYet("ReadCounters")
}

// ReadWindow is not implemented yet.
func (c *Client) ReadWindow(ctx context.Context, id string, last time.Duration) (*shardcounter.Reading, error) {
	return nil, notYet("ReadWindow")
}

// ReadSeries is not implemented yet.
func (c *Client) ReadSeries(ctx context.Context, id string, last, bucket time.Duration) (*shardcounter.Series, error) {
	return nil, notYet("ReadSeries")
}

// Placement is not implemented yet.
func (c *Client) Placement(ctx context.Context, id string) (*shardcounter.Placement, error) {
	return nil, notYet("Placement")
}

// IsMember is not implemented yet.
func (c *Client) IsMember(ctx context.Context, id, member string) (bool, error) {
	return false, notYet("IsMember")
}

// ListMembers is not implemented yet.
func (c *Client) ListMembers(ctx context.Context, id string, opts shardcounter.ListOptions) (*shardcounter.MemberList, error) {
	return nil, notYet("ListMembers")
}
