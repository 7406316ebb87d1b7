package engine

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardcounter/shardcounter"
)

// The spans the engine makes with Config.Tracer and their attributes
// (docs/OPERATIONS.md, "Traces").
const (
	// SpanCommit is a batch's span: from the cut of the batch to the
	// answer of its last store call.
	SpanCommit = "shardcounter.commit"

	AttrBatchWrites     = attribute.Key("shardcounter.batch.writes")      // client writes the batch carried
	AttrBatchCounters   = attribute.Key("shardcounter.batch.counters")    // distinct counters they wrote
	AttrBatchIncrements = attribute.Key("shardcounter.batch.increments")  // increments sent, after folding
	AttrBatchSyncs      = attribute.Key("shardcounter.batch.syncs")       // store calls that commit, retries and pacing included
	AttrStoreOp         = attribute.Key("shardcounter.store.op")          // apply, create, delete, reset, reshard
	AttrStoreCounter    = attribute.Key("shardcounter.store.counter")     // the counter of a call on one counter
	AttrStoreIncrements = attribute.Key("shardcounter.store.increments")  // an apply's increments
	AttrStoreOutcome    = attribute.Key("shardcounter.store.outcome")     // ok, outcome_unknown, or the error's code
	AttrStoreItemErrors = attribute.Key("shardcounter.store.item_errors") // an apply's items refused on their own
)

// spansKey is the context key of WithWriteSpans' spans.
type spansKey struct{}

// WithWriteSpans returns ctx carrying one span per write of a WriteBatch
// call, in order: the span of the request each write belongs to, where
// one call carries the writes of several requests (the RESP server's
// commands of a cycle). Without it every write of the call belongs to
// ctx's span.
func WithWriteSpans(ctx context.Context, spans []trace.Span) context.Context {
	return context.WithValue(ctx, spansKey{}, spans)
}

// setSpans gives each call the span of its write's request, when tracing.
func (e *Engine) setSpans(ctx context.Context, calls []*call) {
	if e.cfg.Tracer == nil {
		return
	}
	spans, _ := ctx.Value(spansKey{}).([]trace.Span)
	if len(spans) != len(calls) {
		spans = nil
	}
	span := trace.SpanFromContext(ctx)
	for i, c := range calls {
		if spans != nil {
			c.span = spans[i]
		} else {
			c.span = span
		}
	}
}

// batchTrace is a batch's span while it flushes, and the store calls that
// committed in it.
type batchTrace struct {
	span  trace.Span
	syncs int
}

// traceKey is the context key of a flush's *batchTrace.
type traceKey struct{}

// traceBatch starts b's span when any of its writes' spans is sampled: a
// child of the first of them, linked from each of them and linking to the
// others, so that a trace viewer leads from any write to the commit it
// waited on. It returns ctx holding the span, and the batchTrace to end,
// or ctx and nil when no write of b is sampled.
func (e *Engine) traceBatch(ctx context.Context, b *batch) (context.Context, *batchTrace) {
	var first trace.Span
	var links []trace.Link
	var prev trace.Span
	for _, c := range b.calls {
		if c.span == nil || c.span == prev || !c.span.SpanContext().IsSampled() {
			continue
		}
		prev = c.span
		if first == nil {
			first = c.span
		} else if len(links) < maxLinks {
			links = append(links, trace.Link{SpanContext: c.span.SpanContext()})
		}
	}
	if first == nil {
		return ctx, nil // the usual batch when few are sampled: no more work
	}
	counters := make(map[string]struct{})
	for _, c := range b.calls {
		counters[c.w.Counter] = struct{}{}
	}
	for k := range b.sums {
		counters[k.counter] = struct{}{}
	}
	ctx, span := e.cfg.Tracer.Start(trace.ContextWithSpan(ctx, first), SpanCommit,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithLinks(links...),
		trace.WithAttributes(AttrBatchWrites.Int(b.writes), AttrBatchCounters.Int(len(counters))))
	link := trace.Link{SpanContext: span.SpanContext()}
	prev = nil
	for _, c := range b.calls {
		if c.span != nil && c.span != prev && c.span.SpanContext().IsSampled() {
			c.span.AddLink(link)
			prev = c.span
		}
	}
	bt := &batchTrace{span: span}
	return context.WithValue(ctx, traceKey{}, bt), bt
}

// maxLinks bounds the links a batch's span holds to its writes' spans;
// the SDK keeps 128 by default (OTEL_SPAN_LINK_COUNT_LIMIT).
const maxLinks = 128

// end ends the batch's span with the increments its first commit sent.
func (bt *batchTrace) end(increments int) {
	bt.span.SetAttributes(AttrBatchIncrements.Int(increments), AttrBatchSyncs.Int(bt.syncs))
	bt.span.End()
}

// storeSpans is the CommitObserver that makes a span of each store call
// made under a sampled span (a batch's, or a request's for the calls a
// request makes itself, as a create), with its outcome; it counts a
// batch's commits.
type storeSpans struct{ tracer trace.Tracer }

// startedKey is the context key of the *Commit whose span storeSpans
// started.
type startedKey struct{}

func (o storeSpans) BeforeCommit(ctx context.Context, c *shardcounter.Commit) context.Context {
	if bt, ok := ctx.Value(traceKey{}).(*batchTrace); ok {
		bt.syncs++
	}
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	attrs := []attribute.KeyValue{AttrStoreOp.String(opName(c.Op))}
	if c.Op == shardcounter.CommitBatch {
		attrs = append(attrs, AttrStoreIncrements.Int(len(c.Incs)))
	} else {
		attrs = append(attrs, AttrStoreCounter.String(c.Counter))
	}
	ctx, _ = o.tracer.Start(ctx, "store."+opName(c.Op), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, startedKey{}, c)
}

func (o storeSpans) AfterCommit(ctx context.Context, c *shardcounter.Commit) {
	if ctx.Value(startedKey{}) != c {
		return
	}
	span := trace.SpanFromContext(ctx)
	outcome := "ok"
	switch {
	case shardcounter.IsOutcomeUnknown(c.Err):
		outcome = "outcome_unknown"
	case c.Err != nil:
		outcome = shardcounter.ErrorCode(c.Err)
	}
	span.SetAttributes(AttrStoreOutcome.String(outcome))
	if c.Err != nil {
		span.SetStatus(codes.Error, shardcounter.ErrorMessage(c.Err))
	} else if c.Op == shardcounter.CommitBatch {
		refused := 0
		for _, o := range c.Outcomes {
			if o.Err != nil {
				refused++
			}
		}
		span.SetAttributes(AttrStoreItemErrors.Int(refused))
	}
	span.End()
}

// opName names a store call in its span's name and attributes.
func opName(op shardcounter.CommitOp) string {
	switch op {
	case shardcounter.CommitBatch:
		return "apply"
	case shardcounter.CommitCreate:
		return "create"
	case shardcounter.CommitDelete:
		return "delete"
	case shardcounter.CommitReset:
		return "reset"
	case shardcounter.CommitReshard:
		return "reshard"
	}
	return "unknown"
}

// setSpan gives c the span of ctx, when tracing.
func (e *Engine) setSpan(ctx context.Context, c *call) {
	if e.cfg.Tracer != nil {
		c.span = trace.SpanFromContext(ctx)
	}
}
