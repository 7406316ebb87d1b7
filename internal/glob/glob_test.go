package glob

import "testing"

// naiveMatch is Redis's glob rules written the slow, obvious way, with
// recursion on every star: the reference Glob.Match is checked against.
func naiveMatch(p, s string) bool {
	if p == "" {
		return s == ""
	}
	switch p[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if naiveMatch(p[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && naiveMatch(p[1:], s[1:])
	case '\\':
		if len(p) >= 2 {
			return s != "" && s[0] == p[1] && naiveMatch(p[2:], s[1:])
		}
		return s == "\\"
	case '[':
		if s == "" {
			return false
		}
		i := 1
		neg := i < len(p) && p[i] == '^'
		if neg {
			i++
		}
		in := false
		for ; i < len(p) && p[i] != ']'; i++ {
			switch {
			case p[i] == '\\' && i+1 < len(p):
				i++
				in = in || p[i] == s[0]
			case i+2 < len(p) && p[i+1] == '-':
				lo, hi := p[i], p[i+2]
				if lo > hi {
					lo, hi = hi, lo
				}
				in = in || (lo <= s[0] && s[0] <= hi)
				i += 2
			default:
				in = in || p[i] == s[0]
			}
		}
		if i < len(p) {
			i++ // the ]
		}
		return in != neg && naiveMatch(p[i:], s[1:])
	}
	return s != "" && s[0] == p[0] && naiveMatch(p[1:], s[1:])
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"*", "a/b", true}, {"a*", "abc", true}, {"a*", "ba", false},
		{"*:likes", "post:1:likes", true}, {"post:?", "post:1", true}, {"post:?", "post:12", false},
		{"h[ae]llo", "hallo", true}, {"h[^e]llo", "hello", false}, {"h[a-b]llo", "hbllo", true},
		{"h[b-a]llo", "hbllo", true}, {`a\*b`, "a*b", true}, {`a\*b`, "axb", false},
		{"[abc", "b", true}, {`x\`, `x\`, true}, {"**a**", "bab", true}, {"a*b*c", "abxbxc", true},
	} {
		if got := Compile(c.p).Match(c.s); got != c.want {
			t.Errorf("%q matching %q = %v, want %v", c.p, c.s, got, c.want)
		}
	}
	for p, want := range map[string]string{"ks:*": "ks:", `a\*b*`: "a*b", "*x": "", "ab[c]": "ab", "abc": "abc"} {
		if got := Compile(p).Prefix(); got != want {
			t.Errorf("prefix of %q = %q, want %q", p, got, want)
		}
	}
}

// FuzzGlob checks Glob.Match against naiveMatch, and that every string a
// pattern matches starts with its literal prefix (where SCAN starts its
// listing).
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{{"a*b?c", "axxbyc"}, {"[^a-c]*", "d"}, {`\[x]`, "[x]"}, {"*[", "a["}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, p, s string) {
		if len(p) > 16 || len(s) > 16 {
			return // naiveMatch is exponential in the stars
		}
		g := Compile(p)
		got := g.Match(s)
		if want := naiveMatch(p, s); got != want {
			t.Fatalf("%q matching %q = %v, the reference says %v", p, s, got, want)
		}
		if pre := g.Prefix(); got && (len(s) < len(pre) || s[:len(pre)] != pre) {
			t.Fatalf("%q matches %q, which does not start with its prefix %q", p, s, pre)
		}
	})
}
