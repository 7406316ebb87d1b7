package bench

import (
	"bufio"
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// The chart is plain SVG written here rather than by a plotting library:
// a few lines, points, ticks and words need no font files, PDF or raster
// code, and none of that is linked into the server binary that embeds
// this package's caller (issue 11). Text is left to the viewer's
// sans-serif face, so the file carries no font.

// Chart geometry, in SVG user units (pixels at 100%): wide enough for a
// legend inside the plot, small enough to sit in a README.
const (
	chartWidth   = 800
	chartHeight  = 450
	marginLeft   = 78
	marginRight  = 24
	marginTop    = 40
	marginBottom = 52
	legendLine   = 18 // height of one legend entry
)

// seriesColors tell series apart for readers with common colour-vision
// deficiencies (the Okabe–Ito palette); peers are drawn dashed in darker
// tones after them.
var seriesColors = []string{
	"#0072b2", // blue
	"#d55e00", // vermillion
	"#009e73", // bluish green
	"#cc79a7", // reddish purple
	"#e69f00", // orange
	"#56b4e9", // sky blue
}

var peerColors = []string{"#000000", "#6e6e6e", "#a03c3c", "#3c6e3c", "#5a3c8c"}

// WriteSVG draws the throughput of runs against their shard count as an
// SVG chart: one line with points per store, path and counter variant,
// and each peer as a dashed horizontal line at its throughput (peers have
// no shards), named in the legend with its figure. The shard axis is
// logarithmic (base 2) with a tick at each shard count measured; the
// throughput axis starts at 0 so that heights compare as ratios.
func WriteSVG(w io.Writer, title string, runs []Run) error {
	ours, peers := split(runs)
	if len(ours) == 0 && len(peers) == 0 {
		return fmt.Errorf("bench: no runs to chart")
	}
	data := collectSeries(ours, peers)
	sc, yticks := newChartScale(data, len(data.order)+len(peers))

	s := newSVG(w, chartWidth, chartHeight, title)
	drawAxes(s, sc, yticks, data.shards)
	// Series and peers, then the legend on top of them.
	legend := drawSeries(s, sc, data)
	legend = append(legend, drawPeers(s, sc, peers)...)
	drawLegend(s, sc, legend)
	s.printf("</svg>\n")
	return s.flush()
}

// chartPoint is one run on the chart: its shard count and throughput.
type chartPoint struct{ x, y float64 }

// chartSeries is what the chart draws of our runs: the series in order of
// first appearance (so colours follow the order runs were measured), their
// points, the shard counts measured, and the highest throughput of any run,
// peers included, which sets the height of the throughput axis.
type chartSeries struct {
	order  []string
	points map[string][]chartPoint
	shards []int
	top    float64
}

// collectSeries groups our runs into series and finds the extent of the
// axes; peers count only towards the highest throughput.
func collectSeries(ours, peers []Run) chartSeries {
	d := chartSeries{points: map[string][]chartPoint{}}
	for _, r := range ours {
		k := seriesName(r)
		if _, ok := d.points[k]; !ok {
			d.order = append(d.order, k)
		}
		d.points[k] = append(d.points[k], chartPoint{float64(r.Shards), r.OpsPerSec})
		if !slices.Contains(d.shards, r.Shards) {
			d.shards = append(d.shards, r.Shards)
		}
		d.top = max(d.top, r.OpsPerSec)
	}
	for _, r := range peers {
		d.top = max(d.top, r.OpsPerSec)
	}
	slices.Sort(d.shards)
	if len(d.shards) == 0 {
		d.shards = []int{1}
	}
	return d
}

// chartScale maps shard counts and throughputs to SVG coordinates inside
// the plot area.
type chartScale struct {
	lo, hi                       float64 // shard axis extent, with margin
	ymax                         float64 // throughput at the top of the plot
	left, right, plotTop, bottom float64 // plot area
}

// newChartScale fits the axes to data, leaving head room above the highest
// figure for a legend of entries lines, and returns the throughput ticks.
func newChartScale(data chartSeries, entries int) (chartScale, []float64) {
	lo, hi := float64(data.shards[0]), float64(data.shards[len(data.shards)-1])
	if lo == hi { // one shard count: give the axis some width
		lo, hi = lo/2, hi*2
	}
	lo, hi = lo/1.25, hi*1.25
	ymax := data.top * (1.15 + 0.09*float64(entries))
	if ymax <= 0 {
		ymax = 1
	}
	yticks := niceTicks(ymax)
	ymax = max(ymax, yticks[len(yticks)-1])
	return chartScale{
		lo: lo, hi: hi, ymax: ymax,
		left: float64(marginLeft), right: float64(chartWidth - marginRight),
		plotTop: float64(marginTop), bottom: float64(chartHeight - marginBottom),
	}, yticks
}

// xOf places a shard count on the logarithmic shard axis.
func (c chartScale) xOf(x float64) float64 {
	return c.left + (c.right-c.left)*(math.Log2(x)-math.Log2(c.lo))/(math.Log2(c.hi)-math.Log2(c.lo))
}

// yOf places a throughput on the linear throughput axis.
func (c chartScale) yOf(y float64) float64 { return c.bottom - (c.bottom-c.plotTop)*y/c.ymax }

// drawAxes draws the grid, the ticks at each throughput tick and each shard
// count measured, and the axes with their names.
func drawAxes(s *svg, c chartScale, yticks []float64, shards []int) {
	for _, v := range yticks {
		y := c.yOf(v)
		s.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0" stroke-width="1"/>`+"\n", c.left, y, c.right, y)
		s.text(c.left-6, y+4, 11, "end", "", Thousands(v))
	}
	for _, n := range shards {
		x := c.xOf(float64(n))
		s.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0" stroke-width="1"/>`+"\n", x, c.plotTop, x, c.bottom)
		s.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000000" stroke-width="1"/>`+"\n", x, c.bottom, x, c.bottom+5)
		s.text(x, c.bottom+18, 11, "middle", "", fmt.Sprint(n))
	}
	s.printf(`<path d="M%.1f,%.1f V%.1f H%.1f" fill="none" stroke="#000000" stroke-width="1"/>`+"\n", c.left, c.plotTop, c.bottom, c.right)
	s.text((c.left+c.right)/2, chartHeight-12, 12, "middle", "", "shards per counter (log scale)")
	s.text(18, (c.plotTop+c.bottom)/2, 12, "middle", fmt.Sprintf(`transform="rotate(-90 18 %.1f)"`, (c.plotTop+c.bottom)/2), "throughput (operations/s)")
}

// legendEntry is one line of the legend; dash is empty for our series,
// which are drawn solid with points.
type legendEntry struct{ label, color, dash string }

// drawSeries draws each series of our runs as a line through its points,
// in shard order, and returns their legend entries.
func drawSeries(s *svg, c chartScale, data chartSeries) []legendEntry {
	var legend []legendEntry
	for i, k := range data.order {
		color := seriesColors[i%len(seriesColors)]
		pts := data.points[k]
		slices.SortFunc(pts, func(a, b chartPoint) int { return cmp.Compare(a.x, b.x) })
		var path strings.Builder
		for j, p := range pts {
			cmd := "L"
			if j == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%.1f,%.1f ", cmd, c.xOf(p.x), c.yOf(p.y))
		}
		s.printf(`<path d="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.TrimSpace(path.String()), color)
		for _, p := range pts {
			s.printf(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", c.xOf(p.x), c.yOf(p.y), color)
		}
		legend = append(legend, legendEntry{k + " (shardcounter)", color, ""})
	}
	return legend
}

// drawPeers draws each peer as a dashed line across the plot at its
// throughput, since a peer has no shard count, and returns their legend
// entries, which carry the figure.
func drawPeers(s *svg, c chartScale, peers []Run) []legendEntry {
	var legend []legendEntry
	for i, r := range peers {
		color := peerColors[i%len(peerColors)]
		dash := fmt.Sprintf("6 %d", 3+2*(i%3))
		y := c.yOf(r.OpsPerSec)
		s.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="%s"/>`+"\n", c.left, y, c.right, y, color, dash)
		legend = append(legend, legendEntry{fmt.Sprintf("peer %s: %s/s", peerLabel(r), Thousands(r.OpsPerSec)), color, dash})
	}
	return legend
}

// drawLegend draws the legend in the head room at the top left of the
// plot, on a translucent box sized to its longest label.
func drawLegend(s *svg, c chartScale, legend []legendEntry) {
	width := 0
	for _, e := range legend {
		width = max(width, len([]rune(e.label)))
	}
	lx, ly := c.left+8, c.plotTop+6
	s.printf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="#ffffff" fill-opacity="0.85" stroke="#c0c0c0"/>`+"\n",
		lx, ly, 48+6.2*float64(width), legendLine*len(legend)+8)
	for i, e := range legend {
		y := ly + 4 + legendLine*float64(i) + legendLine/2
		dash := ""
		if e.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, e.dash)
		}
		s.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx+6, y, lx+34, y, e.color, dash)
		if e.dash == "" {
			s.printf(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", lx+20, y, e.color)
		}
		s.text(lx+40, y+4, 11, "start", "", e.label)
	}
}

// seriesName names a series of shardcounter runs: the store, the path,
// and the counter variant when it is not the plain one.
func seriesName(r Run) string {
	name := r.Path
	if r.Store != "" {
		name = r.Store + " " + r.Path
	}
	if r.Variant != "" && r.Variant != VariantPlain {
		name += " " + r.Variant
	}
	return name
}

// niceTicks returns tick values from 0 to at least top, 4 to 8 of them,
// at steps of 1, 2 or 5 times a power of ten.
func niceTicks(top float64) []float64 {
	raw := top / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if step = m * mag; top/step <= 8 {
			break
		}
	}
	var ticks []float64
	for v := 0.0; ; v += step {
		ticks = append(ticks, v)
		if v >= top {
			break
		}
	}
	return ticks
}

// svg writes SVG elements, keeping the first write error.
type svg struct {
	w   *bufio.Writer
	err error
}

func (s *svg) printf(format string, args ...any) {
	if s.err == nil {
		_, s.err = fmt.Fprintf(s.w, format, args...)
	}
}

// text writes a text element at (x, y) with the given size and anchor;
// attrs are extra attributes, content is escaped.
func (s *svg) text(x, y float64, size int, anchor, attrs, content string) {
	var b strings.Builder
	xml.EscapeText(&b, []byte(content)) //nolint:errcheck // a Builder does not fail
	if attrs != "" {
		attrs = " " + attrs
	}
	s.printf(`<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s"%s>%s</text>`+"\n", x, y, size, anchor, attrs, b.String())
}

func (s *svg) flush() error {
	if s.err != nil {
		return s.err
	}
	return s.w.Flush()
}
