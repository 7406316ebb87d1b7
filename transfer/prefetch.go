package transfer

// prefetchBatch is how many records the reader goroutine of an import
// hands over at once, and prefetchDepth how many such runs it may be
// ahead: a few thousand records, whatever the size of the export.
const (
	prefetchBatch = 256
	prefetchDepth = 4
)

type fetched struct {
	rec *Record
	err error
}

// prefetch returns a next that yields what next yields, in order, read by
// a goroutine of its own ahead of the caller, so that decoding the
// export's lines (JSON, a third of an import's CPU) runs while the store
// writes the batch before. The goroutine stops after next's first error
// or when stop is called; stop does not wait for a read in flight.
func prefetch(next func() (*Record, error)) (func() (*Record, error), func()) {
	ch := make(chan []fetched, prefetchDepth)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		run := make([]fetched, 0, prefetchBatch)
		for {
			rec, err := next()
			run = append(run, fetched{rec, err})
			if len(run) < prefetchBatch && err == nil {
				continue
			}
			select {
			case ch <- run:
			case <-done:
				return
			}
			if err != nil {
				return
			}
			run = make([]fetched, 0, prefetchBatch)
		}
	}()
	var cur []fetched
	var last error // the error that ended the reads, given again after it
	get := func() (*Record, error) {
		for len(cur) == 0 {
			run, ok := <-ch
			if !ok {
				return nil, last
			}
			cur = run
		}
		f := cur[0]
		cur = cur[1:]
		if f.err != nil {
			last = f.err
		}
		return f.rec, f.err
	}
	return get, func() { close(done) }
}
