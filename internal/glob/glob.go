// Package glob holds Redis's glob patterns, as SCAN's MATCH and the key
// patterns of users (package acl) use them.
package glob

// Glob is a compiled pattern with Redis's glob rules on bytes: * matches
// any run of bytes, ? any one byte, [abc] one of a set ([^abc] one not in it, [a-z] a range, either way round), and \x the
// byte x itself; a [ without its ] runs to the end of the pattern, and a
// trailing \ is a \. path.Match differs (its * stops at /, and it refuses
// a malformed class), so this is written out. Matching is the usual
// greedy walk with one star to go back to: time linear in the pattern
// times the string, never exponential.
type Glob struct {
	toks []token
}

// token is one element of a pattern: a star, or a matcher of one byte.
type token struct {
	star bool
	any  bool      // ?
	set  *[32]byte // a class: bit b set when byte b is in it
	lit  byte      // a literal byte, when none of the above
}

// Compile compiles pattern.
func Compile(pattern string) Glob {
	var g Glob
	p := pattern
	for i := 0; i < len(p); i++ {
		switch ch := p[i]; ch {
		case '*':
			if n := len(g.toks); n == 0 || !g.toks[n-1].star {
				g.toks = append(g.toks, token{star: true})
			}
		case '?':
			g.toks = append(g.toks, token{any: true})
		case '\\':
			if i+1 < len(p) {
				i++
			}
			g.toks = append(g.toks, token{lit: p[i]})
		case '[':
			var set [32]byte
			i++
			neg := i < len(p) && p[i] == '^'
			if neg {
				i++
			}
			for ; i < len(p) && p[i] != ']'; i++ {
				lo := p[i]
				if lo == '\\' && i+1 < len(p) {
					i++
					lo = p[i]
				} else if i+2 < len(p) && p[i+1] == '-' {
					hi := p[i+2]
					i += 2
					if lo > hi {
						lo, hi = hi, lo
					}
					for b := int(lo); b <= int(hi); b++ {
						set[b/8] |= 1 << (b % 8)
					}
					continue
				}
				set[lo/8] |= 1 << (lo % 8)
			}
			if neg {
				for b := range set {
					set[b] = ^set[b]
				}
			}
			g.toks = append(g.toks, token{set: &set})
		default:
			g.toks = append(g.toks, token{lit: ch})
		}
	}
	return g
}

// one reports whether a one-byte token matches b.
func (t token) one(b byte) bool {
	switch {
	case t.any:
		return true
	case t.set != nil:
		return t.set[b/8]&(1<<(b%8)) != 0
	}
	return t.lit == b
}

// Match reports whether s matches the whole pattern.
func (g Glob) Match(s string) bool {
	ti, si := 0, 0
	star, mark := -1, 0 // the last star's token, and where its match ends so far
	for si < len(s) {
		switch {
		case ti < len(g.toks) && g.toks[ti].star:
			star, mark = ti, si
			ti++
		case ti < len(g.toks) && g.toks[ti].one(s[si]):
			ti++
			si++
		case star >= 0:
			mark++ // let the star take one byte more
			ti, si = star+1, mark
		default:
			return false
		}
	}
	for ti < len(g.toks) && g.toks[ti].star {
		ti++
	}
	return ti == len(g.toks)
}

// Prefix returns the literal bytes the pattern starts with, which every
// string it matches starts with: where a listing can begin.
func (g Glob) Prefix() string {
	var b []byte
	for _, t := range g.toks {
		if t.star || t.any || t.set != nil {
			break
		}
		b = append(b, t.lit)
	}
	return string(b)
}

// LiteralStar returns the literal bytes the pattern starts with and
// whether the pattern is just those followed by one star ("views:*",
// "*"): then it matches every string that starts with them, and so covers
// every key of a prefix that does.
func (g Glob) LiteralStar() (lit string, star bool) {
	lit = g.Prefix()
	n := len(lit)
	return lit, len(g.toks) == n+1 && g.toks[n].star
}
