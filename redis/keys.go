package redis

import (
	"hash/fnv"
	"strconv"
	"sync"

	"github.com/shardcounter/shardcounter"
)

// NumSlots is the number of hash slots of a Redis Cluster. Every key maps
// to one slot by CRC16 of its hash tag (or of the whole key); each slot is
// served by one master.
const NumSlots = 16384

// KeySlot returns the Redis Cluster hash slot of key, exactly as the server
// computes it (CLUSTER KEYSLOT): CRC16-XMODEM of the hash tag, the part
// between the first '{' and the next '}', when that part is not empty, or
// else of the whole key, modulo 16384.
func KeySlot(key string) int {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						key = key[i+1 : j]
					}
					return int(crc16(key) % NumSlots)
				}
			}
			break
		}
	}
	return int(crc16(key) % NumSlots)
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// crc16 is CRC16-CCITT in the XMODEM variant (polynomial 0x1021, initial
// value 0), the checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c = c<<8 ^ crcTable[byte(c>>8)^s[i]]
	}
	return c
}

// slotTags holds, for every slot, a short hash tag that hashes to it, so
// that a shard key can be placed on a slot of our choosing. It is built on
// first use from base-36 numbers: about 170,000 CRC16s, a millisecond.
var slotTags = sync.OnceValue(func() *[NumSlots]string {
	var t [NumSlots]string
	for n, left := uint64(0), NumSlots; left > 0; n++ {
		tag := strconv.FormatUint(n, 36)
		if s := crc16(tag) % NumSlots; t[s] == "" {
			t[s] = tag
			left--
		}
	}
	return &t
})

// slotStride spreads consecutive shards over the slot space: slot of shard
// i = base + i·stride (mod 16384). The stride is 16384 divided by the golden
// ratio, rounded to an odd number, so the first k shards of any counter are
// nearly evenly spaced over the slots for every k (the three-gap theorem):
// with masters that each own a contiguous third of the slots, any 5 or more
// shards of one counter touch all three.
const slotStride = 10127

// keys names the Redis keys of one counter incarnation. Every key starts
// with the store's prefix. Each shard key and its request-id set share a
// hash tag chosen for the shard's slot, so the two live in the same slot
// and one script can update both. The slots depend on the counter id
// alone, so which masters hold a counter is known before it is created.
type keys struct {
	prefix      string
	incarnation string // random per CreateCounter, so a re-created counter shares no keys with the old one
	base        int    // slot of shard 0
	oneSlot     bool   // every shard in slot base: see oneSlot
}

// oneSlot reports whether counter id of spec keeps every shard in one
// slot: a bounded counter, whose total one script checks, and a rate
// limit's key state (shardcounter.IsLimitKeyID), whose take one script
// decides on all its shards (limit.go).
func oneSlot(id string, spec shardcounter.Spec) bool {
	return spec.Bounded() || shardcounter.IsLimitKeyID(id)
}

func newKeys(prefix, id, incarnation string, oneSlot bool) keys {
	return keys{prefix: prefix, incarnation: incarnation, base: int(hashID(id) % NumSlots), oneSlot: oneSlot}
}

// slot returns the slot that shard i of the counter lives in.
func (k keys) slot(i int) int {
	if k.oneSlot {
		return k.base
	}
	return (k.base + i*slotStride) % NumSlots
}

// shard returns the key of shard i: a hash with fields v (the value), e (the
// layout epoch the shard accepts writes for) and fd (the epoch of the
// reshard that last folded removed shards into it), among others.
func (k keys) shard(i int) string {
	return k.prefix + "{" + slotTags()[k.slot(i)] + "}" + k.incarnation + ":" + strconv.Itoa(i)
}

// shards returns the keys of shards [0, n).
func (k keys) shards(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = k.shard(i)
	}
	return out
}

// ids returns the key of the sorted set of request ids recorded on shard
// i, scored by the Unix millisecond at which each id expires.
func (k keys) ids(i int) string {
	return k.shard(i) + ":ids"
}

// members returns the key of the sorted set (all scores 0, in byte order)
// of the members of a distinct counter on shard i in member generation
// gen: the epoch at which its shard count began (see finishReshard).
func (k keys) members(i int, gen int64) string {
	return k.shard(i) + ":m" + strconv.FormatInt(gen, 10)
}

// buckets returns the key of the hash of a windowed counter's time buckets
// on shard i: bucket start (Unix seconds) -> the sum of its writes there.
func (k keys) buckets(i int) string { return k.shard(i) + ":wb" }

// bucketIndex returns the key of the sorted set of the bucket starts of
// shard i, scored by start, so that old buckets are found without reading
// the others.
func (k keys) bucketIndex(i int) string { return k.shard(i) + ":wi" }

// bounds returns the key of a bounded counter's total and bounds (fields
// t, lo, hi), in the slot of all its shards.
func (k keys) bounds() string {
	return k.prefix + "{" + slotTags()[k.base] + "}" + k.incarnation + ":b"
}

// hashID hashes a counter id: FNV-1a, whose high bits barely change
// between ids that differ in their last byte, then the splitmix64
// finalizer, which spreads every bit of it over all bits.
func hashID(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	x := h.Sum64()
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// indexBuckets is how many sorted sets the index of counter ids is spread
// over. ListCounters merges them, so more buckets cost each page more
// round trips' worth of entries; fewer make each a hotter, bigger key and
// put more counters behind each master. With 16, spread evenly over the
// slot space, a master of three holds five or six.
const indexBuckets = 16

// bucketOf returns the index bucket of a counter id.
func bucketOf(id string) int { return int((hashID(id) >> 32) % indexBuckets) }

// bucketSlot returns the slot of index bucket b: the middle of the b-th
// sixteenth of the slot space.
func bucketSlot(b int) int { return b*NumSlots/indexBuckets + NumSlots/indexBuckets/2 }

// bucketKey returns the key of index bucket b: a sorted set of counter ids,
// all scores 0, so ZRANGEBYLEX reads them in byte order.
func bucketKey(prefix string, b int) string {
	return prefix + "{" + slotTags()[bucketSlot(b)] + "}ids"
}

// metaKey returns the key of a counter's metadata. It shares the slot of
// the counter's index bucket, so a counter's metadata and its index entry
// are created and removed in one script: the index never names a counter
// that does not exist, nor misses one that does.
func metaKey(prefix, id string) string {
	return prefix + "{" + slotTags()[bucketSlot(bucketOf(id))] + "}c:" + id
}
