package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes runs as an aligned text table, one line per run, with
// each run's throughput as a multiple of the first run's and, for the
// engine path, the writes each store commit carried. Columns that only
// some workloads have (writes refused by a bound, resident memory) are
// shown when a run has them.
func WriteTable(w io.Writer, runs []Run) error {
	var refused, memory, docs bool
	for _, r := range runs {
		refused = refused || r.Refused > 0
		memory = memory || r.Memory != nil
		docs = docs || r.ShardCommitsPerWrite > 0
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "name\tpath\tshards\tclients\tops\tops/s\tp50 ms\tp99 ms\terrors\t")
	if refused {
		fmt.Fprint(tw, "refused\t")
	}
	fmt.Fprint(tw, "verified\t")
	if memory {
		fmt.Fprint(tw, "RSS MiB before\tmax\tafter\t")
	}
	fmt.Fprint(tw, "vs first\twrites/commit\t")
	if docs {
		fmt.Fprint(tw, "shard commits/write\t")
	}
	fmt.Fprintln(tw)
	for _, r := range runs {
		perCommit := "-"
		if r.WritesPerCommit > 0 {
			perCommit = fmt.Sprintf("%.1f", r.WritesPerCommit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.0f\t%.2f\t%.2f\t%d\t",
			r.Name, r.Path, shardsText(r), r.Clients, r.Ops, r.OpsPerSec, r.P50MS, r.P99MS, r.Errors)
		if refused {
			fmt.Fprintf(tw, "%d\t", r.Refused)
		}
		fmt.Fprintf(tw, "%v\t", r.Verified)
		if memory {
			if m := r.Memory; m != nil {
				fmt.Fprintf(tw, "%s\t%s\t%s\t", mib(m.RSSBefore), maxText(m), mib(m.RSSAfter))
			} else {
				fmt.Fprint(tw, "-\t-\t-\t")
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t", Ratio(r.OpsPerSec, runs[0].OpsPerSec), perCommit)
		if docs {
			if r.ShardCommitsPerWrite > 0 {
				fmt.Fprintf(tw, "%.3f\t", r.ShardCommitsPerWrite)
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// mib formats a byte count in MiB with one decimal.
func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// maxText is the most resident memory sampled, with its anonymous and
// mapped files' parts when known, and the process's own peak when it has
// one: "590.0 (anon 180.0, files 400.0), peak 601.5".
func maxText(m *Memory) string {
	t := mib(m.RSSMax)
	switch {
	case m.RSSMaxFiles == nil:
	case m.RSSMaxAnon == nil:
		t += fmt.Sprintf(" (files %s)", mib(*m.RSSMaxFiles))
	default:
		t += fmt.Sprintf(" (anon %s, files %s)", mib(*m.RSSMaxAnon), mib(*m.RSSMaxFiles))
	}
	if m.RSSPeak > 0 {
		t += ", peak " + mib(m.RSSPeak)
	}
	return t
}

// WriteRatios writes, under the table, each of shardcounter's runs as a
// multiple of each peer's throughput: one column per peer, measured in the
// same session with the same clients and duration. It writes nothing when
// runs has no peer or nothing but peers.
func WriteRatios(w io.Writer, runs []Run) error {
	ours, peers := split(runs)
	if len(ours) == 0 || len(peers) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nthroughput as a multiple of each peer's (same clients, duration and workload, this session):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "run\tops/s\t")
	for _, p := range peers {
		fmt.Fprintf(tw, "vs %s\t", peerLabel(p))
	}
	fmt.Fprintln(tw)
	fmt.Fprint(tw, "\t\t")
	for _, p := range peers {
		fmt.Fprintf(tw, "(%.0f ops/s)\t", p.OpsPerSec)
	}
	fmt.Fprintln(tw)
	for _, r := range ours {
		fmt.Fprintf(tw, "%s\t%.0f\t", r.Name, r.OpsPerSec)
		for _, p := range peers {
			fmt.Fprintf(tw, "%s\t", Ratio(r.OpsPerSec, p.OpsPerSec))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// WriteMarkdown writes runs as a Markdown table, followed by the ratios of
// WriteRatios as a second table when runs has peers.
func WriteMarkdown(w io.Writer, runs []Run) error {
	var refused, memory, docs bool
	for _, r := range runs {
		refused = refused || r.Refused > 0
		memory = memory || r.Memory != nil
		docs = docs || r.ShardCommitsPerWrite > 0
	}
	fmt.Fprint(w, "| run | shards | clients | ops/s | p50 ms | p99 ms | errors |")
	sep := "|---|---:|---:|---:|---:|---:|---:|"
	if refused {
		fmt.Fprint(w, " refused |")
		sep += "---:|"
	}
	fmt.Fprint(w, " verified |")
	sep += "---|"
	if memory {
		fmt.Fprint(w, " RSS MiB before / max / after |")
		sep += "---:|"
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, sep)
	for _, r := range runs {
		fmt.Fprintf(w, "| %s | %s | %d | %s | %.2f | %.2f | %d |",
			r.Name, shardsText(r), r.Clients, Thousands(r.OpsPerSec), r.P50MS, r.P99MS, r.Errors)
		if refused {
			fmt.Fprintf(w, " %d |", r.Refused)
		}
		fmt.Fprintf(w, " %v |", r.Verified)
		if memory {
			if m := r.Memory; m != nil {
				fmt.Fprintf(w, " %s / %s / %s (%s) |", mib(m.RSSBefore), maxText(m), mib(m.RSSAfter), m.Process)
			} else {
				fmt.Fprint(w, " - |")
			}
		}
		fmt.Fprintln(w)
	}
	ours, peers := split(runs)
	if len(ours) == 0 || len(peers) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "| run | ops/s |")
	for _, p := range peers {
		fmt.Fprintf(w, " vs %s (%s ops/s) |", peerLabel(p), Thousands(p.OpsPerSec))
	}
	fmt.Fprint(w, "\n|---|---:|")
	fmt.Fprint(w, strings.Repeat("---:|", len(peers)))
	fmt.Fprintln(w)
	for _, r := range ours {
		fmt.Fprintf(w, "| %s | %s |", r.Name, Thousands(r.OpsPerSec))
		for _, p := range peers {
			fmt.Fprintf(w, " %s |", Ratio(r.OpsPerSec, p.OpsPerSec))
		}
		fmt.Fprintln(w)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// split separates shardcounter's runs from the peers'.
func split(runs []Run) (ours, peers []Run) {
	for _, r := range runs {
		if r.Path == PathPeer {
			peers = append(peers, r)
		} else {
			ours = append(ours, r)
		}
	}
	return ours, peers
}

// peerLabel is a peer run's name without the "peer/" every peer has.
func peerLabel(r Run) string { return strings.TrimPrefix(r.Name, "peer/") }

func shardsText(r Run) string {
	if r.Path == PathPeer {
		return "-"
	}
	return fmt.Sprint(r.Shards)
}

// Ratio formats a/b as "1.23×", or "-" when b is 0.
func Ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	switch q := a / b; {
	case q >= 10:
		return fmt.Sprintf("%.1f×", q)
	case q >= 0.1:
		return fmt.Sprintf("%.2f×", q)
	default:
		return fmt.Sprintf("%.3f×", q)
	}
}

// Thousands formats a rate rounded to a whole number with commas.
func Thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
