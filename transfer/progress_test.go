package transfer

import (
	"bytes"
	"strings"
	"testing"
)

// TestProgressLines checks the plain periodic line, with the eta that a
// known fraction gives, the redrawn line of a terminal, and the summary.
func TestProgressLines(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf, "counters", false, 0)
	p.SetFraction(func() float64 { return 0.5 })
	p.Add(10)
	p.print()
	p.Done("imported", "0 conflicts")
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "10 counters (50%), ") || !strings.Contains(lines[0], "eta ") ||
		!strings.HasPrefix(lines[1], "imported 10 counters in ") || !strings.HasSuffix(lines[1], ", 0 conflicts") {
		t.Fatalf("plain progress:\n%s", buf.String())
	}
	buf.Reset()
	p = NewProgress(&buf, "keys", true, 100)
	p.Add(25)
	p.print()
	p.Done("read", "")
	if out := buf.String(); !strings.HasPrefix(out, "\r\x1b[K25/100 keys (25%), ") || !strings.Contains(out, "\r\x1b[Kread 25 keys in ") {
		t.Fatalf("terminal progress: %q", out)
	}
	var nilP *Progress
	nilP.Add(1)
	nilP.SetFraction(nil)
	nilP.Done("x", "") // a nil Progress reports nothing
}
