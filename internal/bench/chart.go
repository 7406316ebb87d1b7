package bench

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart size: wide enough for a legend beside the plot, small enough to
// sit in a README.
const (
	chartWidth  = 8 * vg.Inch
	chartHeight = 4.5 * vg.Inch
)

// seriesColors tell series apart for readers with common colour-vision
// deficiencies (the Okabe–Ito palette); peers are drawn dashed in grey
// tones after them.
var seriesColors = []color.RGBA{
	{0, 114, 178, 255},   // blue
	{213, 94, 0, 255},    // vermillion
	{0, 158, 115, 255},   // bluish green
	{204, 121, 167, 255}, // reddish purple
	{230, 159, 0, 255},   // orange
	{86, 180, 233, 255},  // sky blue
}

var peerColors = []color.RGBA{
	{0, 0, 0, 255},
	{110, 110, 110, 255},
	{160, 60, 60, 255},
	{60, 110, 60, 255},
	{90, 60, 140, 255},
}

// WriteSVG draws the throughput of runs against their shard count as an
// SVG chart: one line with points per store and path, and each peer as a
// dashed horizontal line at its throughput (peers have no shards), named
// in the legend with its figure. The shard axis is logarithmic (base 2)
// with a tick at each shard count measured; the throughput axis starts at
// 0 so that heights compare as ratios.
func WriteSVG(w io.Writer, title string, runs []Run) error {
	ours, peers := split(runs)
	if len(ours) == 0 && len(peers) == 0 {
		return fmt.Errorf("bench: no runs to chart")
	}
	p := plot.New()
	// A sans-serif face (gonum's bundled Liberation Sans) reads better at
	// chart sizes than the default serif.
	for _, f := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		f.Typeface, f.Variant = "Liberation", "Sans"
	}
	p.Title.Text = title
	p.Title.Padding = vg.Points(6)
	p.Title.TextStyle.Font.Size = 13
	p.X.Label.Text = "shards per counter (log scale)"
	p.Y.Label.Text = "throughput (operations/s)"
	p.Y.Min = 0
	// Top left, where the lines rarely are: throughput grows with shards.
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(6), vg.Points(-4)
	p.Legend.TextStyle.Font.Size = 10
	p.Legend.ThumbnailWidth = vg.Points(28)
	p.Legend.Padding = vg.Points(1.5)
	p.Add(plotter.NewGrid())

	// Series in order of first appearance: one per store and path.
	type key struct{ store, path string }
	var order []key
	points := map[key]plotter.XYs{}
	var shards []int
	var top float64
	for _, r := range ours {
		k := key{r.Store, r.Path}
		if _, ok := points[k]; !ok {
			order = append(order, k)
		}
		points[k] = append(points[k], plotter.XY{X: float64(r.Shards), Y: r.OpsPerSec})
		if !slices.Contains(shards, r.Shards) {
			shards = append(shards, r.Shards)
		}
		top = max(top, r.OpsPerSec)
	}
	slices.Sort(shards)
	if len(shards) == 0 {
		shards = []int{1}
	}
	lo, hi := float64(shards[0]), float64(shards[len(shards)-1])
	if lo == hi { // one shard count: give the axis some width
		lo, hi = lo/2, hi*2
	}
	for i, k := range order {
		xys := points[k]
		slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		line, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		c := seriesColors[i%len(seriesColors)]
		line.Color, line.Width = c, vg.Points(2)
		pts.Color, pts.Shape, pts.Radius = c, draw.CircleGlyph{}, vg.Points(3)
		p.Add(line, pts)
		name := k.path
		if k.store != "" {
			name = k.store + " " + k.path
		}
		p.Legend.Add(name+" (shardcounter)", line, pts)
	}
	for i, r := range peers {
		line, err := plotter.NewLine(plotter.XYs{{X: lo, Y: r.OpsPerSec}, {X: hi, Y: r.OpsPerSec}})
		if err != nil {
			return err
		}
		line.Color, line.Width = peerColors[i%len(peerColors)], vg.Points(1.5)
		line.Dashes = []vg.Length{vg.Points(6), vg.Points(3 + 2*float64(i%3))}
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("peer %s: %s/s", peerLabel(r), thousands(r.OpsPerSec)), line)
		top = max(top, r.OpsPerSec)
	}
	p.X.Min, p.X.Max = lo/1.25, hi*1.25
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = shardTicks(shards)
	// Head room above the highest figure for the legend.
	p.Y.Max = top * (1.15 + 0.09*float64(len(order)+len(peers)))
	if p.Y.Max <= 0 {
		p.Y.Max = 1
	}
	p.Y.Tick.Marker = rateTicks{}

	c := vgsvg.New(chartWidth, chartHeight)
	p.Draw(draw.New(c))
	_, err := c.WriteTo(w)
	return err
}

// shardTicks puts one labelled tick at each shard count measured.
type shardTicks []int

func (t shardTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for _, s := range t {
		ticks = append(ticks, plot.Tick{Value: float64(s), Label: fmt.Sprint(s)})
	}
	return ticks
}

// rateTicks are plot's default ticks labelled with thousands separators.
type rateTicks struct{}

func (rateTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = thousands(math.Round(ticks[i].Value))
		}
	}
	return ticks
}
