package acl

import (
	"context"
	"log/slog"
)

// Audit writes the audit trail: one structured log line (message
// "audit") for every operation refused for its user's rights and every
// @admin or @keyspace one, with the user, the client's address, the
// operation, its keys and the outcome. It never logs a password or a
// value. A nil *Audit logs nothing. It is safe for concurrent use.
type Audit struct {
	Logger *slog.Logger
}

// MaxAuditKeys bounds the keys of one audit line: a batch of thousands
// logs its first ones and how many there were.
const MaxAuditKeys = 16

// Wants reports whether an operation of categories cats is audited:
// every refusal, and what is @admin or @keyspace.
func (a *Audit) Wants(cats Category, refused bool) bool {
	return a != nil && a.Logger != nil && (refused || cats&(Admin|Keyspace) != 0)
}

// Log writes one line: proto is "http" or "resp", op the operation id or
// command, outcome "refused: REASON", "ok", or the error code or status
// it ended with.
func (a *Audit) Log(proto, addr, user, op string, keys []string, outcome string) {
	if a == nil || a.Logger == nil {
		return
	}
	attrs := []slog.Attr{slog.String("proto", proto), slog.String("user", user), slog.String("addr", addr),
		slog.String("op", op)}
	if len(keys) > MaxAuditKeys {
		attrs = append(attrs, slog.Any("keys", keys[:MaxAuditKeys]), slog.Int("keys_total", len(keys)))
	} else if len(keys) > 0 {
		attrs = append(attrs, slog.Any("keys", keys))
	}
	attrs = append(attrs, slog.String("outcome", outcome))
	a.Logger.LogAttrs(context.Background(), slog.LevelInfo, "audit", attrs...)
}
