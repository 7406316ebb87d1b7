package server

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/engine"
)

// SpanCommand is the name of a command's span until it is known to be
// sampled, when it becomes "RESP " and the command's name in capitals
// ("RESP INCR").
const SpanCommand = "RESP"

// Attributes of a command's span.
const (
	AttrCommand  = attribute.Key("resp.command")   // the command's name in capitals
	AttrClientID = attribute.Key("resp.client.id") // CLIENT ID of its connection
)

// startSpan starts the span of a command of c, named by cmd (nil for an
// unknown command). RESP carries no trace context, so it is a root. A
// span that is not sampled gets no name nor attributes: its command pays
// for the sampler's decision only.
func (s *Server) startSpan(c *conn, cmd *command) trace.Span {
	_, span := s.opts.Tracer.Start(context.Background(), SpanCommand, serverSpan...)
	if span.IsRecording() {
		name := "UNKNOWN"
		if cmd != nil {
			name = strings.ToUpper(cmd.name)
		}
		span.SetName(SpanCommand + " " + name)
		span.SetAttributes(AttrCommand.String(name), AttrClientID.Int64(c.id),
			attribute.String("network.peer.address", c.raddr.String()))
	}
	return span
}

// serverSpan is the option of a command's span, made once: a variadic
// argument to the Tracer interface is allocated at every call.
var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// endSpan ends a command's span; errReply, when not empty, is the error
// it was answered with.
func endSpan(span trace.Span, errReply string) {
	if errReply != "" && span.IsRecording() {
		span.SetStatus(codes.Error, errReply)
	}
	span.End()
}

// withWriteSpans returns ctx with the span of each of the n writes sent,
// that of the command it belongs to, for the engine to link each write to
// the commit that carried it (engine.WithWriteSpans). marks are the places
// in them of hashes' markers (executor.withMarkers), each of which has
// the span of the write after it. spans is scratch space reused from one
// call to the next. When no command is sampled ctx is returned as it is:
// the engine makes no span for writes none of whose spans is sampled.
func withWriteSpans(ctx context.Context, ps []pending, n int, marks []int, spans []trace.Span) (context.Context, []trace.Span) {
	spans = spans[:0]
	sampled := false
	for i := range ps {
		if ps[i].span.SpanContext().IsSampled() {
			sampled = true
			break
		}
	}
	if !sampled {
		return ctx, spans
	}
	next := 0 // of marks
	for _, p := range ps {
		for range p.hi - p.lo {
			if next < len(marks) && marks[next] == len(spans) {
				spans = append(spans, p.span)
				next++
			}
			spans = append(spans, p.span)
		}
	}
	if len(spans) != n {
		return ctx, spans
	}
	return engine.WithWriteSpans(ctx, spans), spans
}

// endWriteSpan ends the span of write command p, whose batch's WriteBatch
// returned res and err: an error when the command was refused, the batch
// failed, or one of its writes did.
func endWriteSpan(p *pending, err error, res []shardcounter.WriteResult) {
	errReply := p.errReply
	switch {
	case errReply != "":
	case err != nil && p.hi > p.lo:
		errReply = errorReply(err)
	case err == nil:
		for _, r := range res[p.lo:p.hi] {
			if r.Error != nil {
				errReply = r.Error.Code + ": " + r.Error.Message
				break
			}
		}
	}
	endSpan(p.span, errReply)
}
