package server

// The write batch's type claims: every name a batch writes is claimed for
// its type before the batch is sent (types.go keeps the claims), and a new
// hash's marker joins its first field's write.

import (
	"context"
	"slices"

	"github.com/shardcounter/shardcounter"
)

// writeName returns the name a write writes, as a RESP key, and the type
// it gives it: a hash's name for a field's counter, else the counter's id.
func writeName(w shardcounter.Write) (string, nameType) {
	if hash, _, ok := shardcounter.SplitHashID(w.Counter); ok {
		return hash, typeHash
	}
	return w.Counter, typePlain
}

// checkTypes claims the names the batch's writes write (claimTypes) and
// drops the writes of every command (every command of an EXEC) that one
// of its names refuses, giving it the error reply. It returns the writes
// left, with the commands' ranges and an EXEC's joins moved to match,
// and the claims' outcome: the hashes whose markers the batch writes, and
// the names to settle once it committed.
func (x *executor) checkTypes(ctx context.Context, ws []shardcounter.Write, ps []pending) ([]shardcounter.Write, claimed) {
	if x.s.types.hold(ws) {
		return ws, claimed{} // the common case: every name known, of its writes' type
	}
	claims := make([]claim, 0, len(ws))
	index := make(map[claim]int)
	at := make([]int, len(ws)) // the claim of each write, -1 for none
	for i, w := range ws {
		if w.Expire != nil || w.Take != nil {
			at[i] = -1 // a deadline change acts on a name of either type; a take's state is no key's
			continue
		}
		name, t := writeName(w)
		cl := claim{name, t}
		j, ok := index[cl]
		if !ok {
			j = len(claims)
			index[cl] = j
			claims = append(claims, cl)
		}
		at[i] = j
	}
	cl := x.s.claimTypes(ctx, claims)
	refused := cl.refused
	keep := make([]bool, len(ws))
	for i := range keep {
		keep[i] = true
	}
	drop := func(lo, hi int, msg *string) {
		for i := lo; i < hi; i++ {
			if at[i] < 0 {
				continue
			}
			if r := refused[at[i]]; r != "" && *msg == "" {
				*msg = r
			}
		}
		if *msg != "" {
			for i := lo; i < hi; i++ {
				keep[i] = false
			}
		}
	}
	for k := range ps {
		p := &ps[k]
		if p.tx == nil {
			drop(p.lo, p.hi, &p.errReply)
			continue
		}
		for j := range p.tx.parts {
			pt := &p.tx.parts[j]
			drop(pt.lo, pt.hi, &pt.errReply)
		}
	}
	// before[i] is the number of writes kept among ws[:i]: a range's new
	// bounds.
	before := make([]int, len(ws)+1)
	out := ws[:0]
	for i, w := range ws {
		before[i] = len(out)
		if keep[i] {
			out = append(out, w)
		}
	}
	before[len(ws)] = len(out)
	for k := range ps {
		p := &ps[k]
		p.lo, p.hi = before[p.lo], before[p.hi]
		if p.tx == nil {
			continue
		}
		for j := range p.tx.parts {
			pt := &p.tx.parts[j]
			pt.lo, pt.hi = before[pt.lo], before[pt.hi]
		}
		for i := p.lo; i < p.hi; i++ {
			out[i].JoinNext = i < p.hi-1
		}
	}
	return out, cl
}

// withMarkers returns ws with the write of each of markers (hashes the
// batch makes) before the hash's first write, joined to it
// (markerWrite): the marker commits with the field, so that a field is
// never committed without its hash's marker. x.marks holds the markers'
// places in the writes returned. Without markers it returns ws itself.
func (x *executor) withMarkers(ws []shardcounter.Write, markers []string) []shardcounter.Write {
	x.marks = x.marks[:0]
	if len(markers) == 0 {
		return ws
	}
	want := make(map[string]bool, len(markers))
	for _, h := range markers {
		want[h] = true
	}
	sent := x.sent[:0]
	for _, w := range ws {
		if w.Expire == nil && w.Take == nil {
			if hash, _, ok := shardcounter.SplitHashID(w.Counter); ok && want[hash] {
				delete(want, hash)
				x.marks = append(x.marks, len(sent))
				sent = append(sent, markerWrite(hash))
			}
		}
		sent = append(sent, w)
	}
	x.sent = sent
	return sent
}

// redoCrossSlot sends again, without its markers, each run of joined
// writes of sent that a store refused whole as a cross-slot transaction
// (a Redis Cluster whose masters hold no shard of both a new hash's
// marker and its field: shardcounter.CrossSlot, nothing of it applied),
// once it made the markers on their own (createMarker): a marker was what
// made the run a cross-slot one, unless the run is a transaction that is
// one without it, which is then refused again. The writes' results in
// res are replaced with those of the second sending.
func (x *executor) redoCrossSlot(ctx context.Context, sent []shardcounter.Write, res []shardcounter.WriteResult) {
	crossSlot := func(r shardcounter.WriteResult) bool { return r.Error != nil && shardcounter.IsCrossSlot(r.Error) }
	var runs [][2]int // [lo, hi] of each run to send again
	var hashes []string
	for _, m := range x.marks {
		if !crossSlot(res[m]) || !crossSlot(res[m+1]) {
			continue
		}
		lo, hi := m, m+1
		for lo > 0 && sent[lo-1].JoinNext {
			lo--
		}
		for hi < len(sent)-1 && sent[hi].JoinNext {
			hi++
		}
		hash, _, _ := shardcounter.SplitHashID(sent[m].Counter)
		hashes = append(hashes, hash)
		if len(runs) == 0 || runs[len(runs)-1][0] != lo {
			runs = append(runs, [2]int{lo, hi})
		}
	}
	if len(runs) == 0 {
		return
	}
	errs := make([]error, len(hashes))
	eachAtOnce(len(hashes), func(k int) { errs[k] = x.s.createMarker(ctx, hashes[k]) })
	failed := map[string]bool{}
	for k, err := range errs {
		if err != nil {
			failed[hashes[k]] = true
			x.s.types.forget(hashes[k])
		}
	}
	var again []shardcounter.Write
	var at []int // the place in sent of each write of again
	for _, r := range runs {
		ok := true
		for i := r[0]; i <= r[1]; i++ {
			if h, f, _ := shardcounter.SplitHashID(sent[i].Counter); f == "" && failed[h] && isMarkerAt(x.marks, i) {
				ok = false // its marker could not be made: the run keeps its error
			}
		}
		if !ok {
			continue
		}
		for i := r[0]; i <= r[1]; i++ {
			if isMarkerAt(x.marks, i) {
				res[i] = shardcounter.WriteResult{Counter: sent[i].Counter, Applied: true} // made on its own
			} else {
				again, at = append(again, sent[i]), append(at, i)
			}
		}
	}
	if len(again) == 0 {
		return
	}
	got, err := x.s.svc.WriteBatch(ctx, again)
	if err == nil && len(got) != len(again) {
		err = shardcounter.Errorf(shardcounter.EINTERNAL, "the service returned %d results for %d writes", len(got), len(again))
	}
	for k, i := range at {
		if err != nil {
			res[i] = shardcounter.WriteResult{Counter: sent[i].Counter, Error: &shardcounter.Error{Code: shardcounter.ErrorCode(err), Message: shardcounter.ErrorMessage(err)}}
		} else {
			res[i] = got[k]
		}
	}
}

// isMarkerAt reports whether place i of a batch's writes is a marker's
// (marks: executor.marks, in order).
func isMarkerAt(marks []int, i int) bool {
	_, ok := slices.BinarySearch(marks, i)
	return ok
}

// markersDone checks the markers' writes of a batch that committed
// (x.marks, in sent), and returns res without their results, matching
// the batch's own writes. A hash whose marker's write failed while its
// field's was applied gets its marker made on its own (createMarker), and
// is forgotten by the cache when that fails too.
func (x *executor) markersDone(ctx context.Context, sent []shardcounter.Write, res []shardcounter.WriteResult) []shardcounter.WriteResult {
	if len(x.marks) == 0 {
		return res
	}
	var redo []string
	for _, m := range x.marks {
		if res[m].Error != nil && res[m+1].Error == nil {
			hash, _, _ := shardcounter.SplitHashID(sent[m].Counter)
			redo = append(redo, hash)
		}
	}
	if len(redo) > 0 {
		errs := make([]error, len(redo))
		eachAtOnce(len(redo), func(k int) { errs[k] = x.s.createMarker(ctx, redo[k]) })
		for k, err := range errs {
			if err != nil {
				x.s.types.forget(redo[k])
			}
		}
	}
	out, next := res[:0], 0
	for i := range res {
		if next < len(x.marks) && x.marks[next] == i {
			next++
			continue
		}
		out = append(out, res[i])
	}
	return out
}
