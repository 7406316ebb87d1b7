package decide

import (
	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/sketch"
)

// Sketches gathers the approx items of a batch by shard, in batch order,
// so that each shard's sketch changes once per commit (sketch.Apply) and
// the shard's items share one outcome. Decide uses it; a store that reads
// sketches its own way before its script decides the rest (Redis) uses it
// directly. The zero value is empty.
type Sketches struct {
	index  map[shardKey]int
	Shards []SketchShard // in the order the batch first touched them
}

// SketchShard is what a batch's approx items add to one shard's sketch.
type SketchShard struct {
	Counter string
	Shard   int
	Members []string // members added
	Merges  [][]byte // encoded sketches merged in
	Items   []int    // the items' positions in the batch

	// Decide's: the shard's sketch as the view gave it, and decoded.
	old []byte
	dec *sketch.Sketch
	err error
}

type shardKey struct {
	counter string
	shard   int
}

// Add notes approx item i, inc, on shard of its counter.
func (s *Sketches) Add(shard int, inc shardcounter.Increment, i int) {
	sh, _ := s.find(inc.Counter, shard)
	sh.add(&inc, i)
}

// find returns the counter's shard, and whether the batch touches it for
// the first time.
func (s *Sketches) find(counter string, shard int) (*SketchShard, bool) {
	k := shardKey{counter, shard}
	if j, ok := s.index[k]; ok {
		return &s.Shards[j], false
	}
	if s.index == nil {
		s.index = make(map[shardKey]int)
	}
	s.index[k] = len(s.Shards)
	s.Shards = append(s.Shards, SketchShard{Counter: counter, Shard: shard})
	return &s.Shards[len(s.Shards)-1], true
}

func (sh *SketchShard) add(inc *shardcounter.Increment, i int) {
	if inc.Sketch != nil {
		sh.Merges = append(sh.Merges, inc.Sketch)
	} else {
		sh.Members = append(sh.Members, inc.Member)
	}
	sh.Items = append(sh.Items, i)
}

// Apply changes the shard's sketch old (nil for none) by its items, and
// sets their outcomes in out: every item Unchanged when the sketch did
// not change (sketch.Apply's verdict), and ErrSketch when old does not
// decode. It returns the new encoding, which a store writes when it
// differs from old: a sparse sketch's bytes may change while its
// estimate does not, and a later estimate depends on them.
func (sh *SketchShard) Apply(old []byte, out []shardcounter.Outcome) ([]byte, error) {
	next, changed, err := sketch.Apply(old, sh.Members, sh.Merges)
	sh.mark(out, changed, err)
	return next, err
}

func (sh *SketchShard) mark(out []shardcounter.Outcome, changed bool, err error) {
	for _, i := range sh.Items {
		if err != nil {
			out[i] = shardcounter.Outcome{Err: ErrSketch(sh.Counter, sh.Shard, err)}
		} else {
			out[i].Unchanged = !changed
		}
	}
}

// FoldSketches returns an approx counter's shard sketches sk resharded
// to shards shards: when it shrinks, each removed shard i's sketch is
// merged into shard i mod shards, so the union, and the value, are the
// same registers; when it grows, the new shards have none. folded lists,
// in order, the kept shards whose sketch changed: a store writes those and
// deletes the removed ones.
func FoldSketches(sk [][]byte, shards int) (out [][]byte, folded []int, err error) {
	out = make([][]byte, shards)
	copy(out, sk)
	changed := make([]bool, shards)
	for i := shards; i < len(sk); i++ {
		if sk[i] == nil {
			continue
		}
		j := i % shards
		if out[j], _, err = sketch.Apply(out[j], nil, [][]byte{sk[i]}); err != nil {
			return nil, nil, err
		}
		changed[j] = true
	}
	for j, c := range changed {
		if c {
			folded = append(folded, j)
		}
	}
	return out, folded, nil
}
