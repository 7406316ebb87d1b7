package shardcounter

import (
	"context"
	"time"
)

// Resetter is implemented by a CounterService that resets counters: the
// engine (over any store) and the HTTP client. It is Redis's SET of an
// integer, GETSET and GETDEL on a sum counter.
type Resetter interface {
	// ResetCounter replaces a sum counter's value by r.Value, or deletes
	// the counter when r.Delete is set, and returns the value it held
	// before. A missing counter is created (not for Delete). Within one
	// engine the reset is one step with respect to every other write and
	// read of the counter: no increment is lost or counted twice across
	// it (package expiry says how, and what another process sharing the
	// store may see).
	ResetCounter(ctx context.Context, id string, r Reset) (*ResetResult, error)
}

// Reset says what ResetCounter does.
type Reset struct {
	// Value is the counter's value after the reset.
	Value int64 `json:"value"`
	// Delete deletes the counter instead (GETDEL); Value must be 0.
	Delete bool `json:"delete,omitempty"`
	// ExpiresAt gives the name this deadline (SET … EX). Without it the
	// reset removes the name's deadline, as SET does, unless KeepTTL.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	KeepTTL   bool       `json:"keep_ttl,omitempty"`
}

// ResetResult is what a reset did: the value before (Existed false and
// Old 0 when the counter did not exist) and after.
type ResetResult struct {
	ID      string `json:"id"`
	Existed bool   `json:"existed"`
	Old     int64  `json:"old"`
	Value   int64  `json:"value"`
	Deleted bool   `json:"deleted,omitempty"`
}

// ValidateReset checks a reset as a client sends it.
func ValidateReset(r Reset) error {
	switch {
	case r.Delete && (r.Value != 0 || r.ExpiresAt != nil || r.KeepTTL):
		return Errorf(EINVALID, "a reset that deletes takes no value, expires_at or keep_ttl")
	case r.ExpiresAt != nil && r.KeepTTL:
		return Errorf(EINVALID, "give expires_at or keep_ttl, not both")
	}
	return nil
}
