package bench

import (
	"bufio"
	"fmt"
	"io"
)

// Bar chart geometry: one row a run, its name left of the bar.
const (
	barRow    = 20
	barLabelW = 300
	barTop    = 44
)

// WriteBars draws the throughput of runs as horizontal bars, one a run in
// the order given, shardcounter's runs in colour by store and the peers
// in grey, each with its figure: the chart for a workload measured on
// several stores, where a shard axis (WriteSVG) would have one point.
// The axis starts at 0, so lengths compare as ratios.
func WriteBars(w io.Writer, title string, runs []Run) error {
	if len(runs) == 0 {
		return fmt.Errorf("bench: no runs to chart")
	}
	var top float64
	for _, r := range runs {
		top = max(top, r.OpsPerSec)
	}
	if top <= 0 {
		top = 1
	}
	ticks := niceTicks(top * 1.12)
	xmax := ticks[len(ticks)-1]
	height := barTop + barRow*len(runs) + 40
	left, right := float64(barLabelW), float64(chartWidth-marginRight)
	xOf := func(v float64) float64 { return left + (right-left)*v/xmax }
	bottom := float64(barTop + barRow*len(runs))

	s := newSVG(w, chartWidth, height, title)
	for _, v := range ticks {
		x := xOf(v)
		s.printf(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#e0e0e0" stroke-width="1"/>`+"\n", x, barTop, x, bottom)
		s.text(x, bottom+16, 11, "middle", "", Thousands(v))
	}
	s.text((left+right)/2, bottom+34, 12, "middle", "", "throughput (operations/s)")
	colors := map[string]string{}
	for i, r := range runs {
		y := float64(barTop + barRow*i)
		c := "#8c8c8c"
		if r.Path != PathPeer {
			if colors[r.Store] == "" {
				colors[r.Store] = seriesColors[len(colors)%len(seriesColors)]
			}
			c = colors[r.Store]
		}
		s.text(left-6, y+barRow*0.7, 11, "end", "", r.Name)
		s.printf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s"/>`+"\n", left, y+3, xOf(r.OpsPerSec)-left, barRow-6, c)
		s.text(xOf(r.OpsPerSec)+4, y+barRow*0.7, 10, "start", "", Thousands(r.OpsPerSec))
	}
	s.printf(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#000000" stroke-width="1"/>`+"\n", left, barTop, left, bottom)
	s.printf("</svg>\n")
	return s.flush()
}

// newSVG starts an SVG document of the given size on w: a white
// background and the title centred at the top.
func newSVG(w io.Writer, width, height int, title string) *svg {
	s := &svg{w: bufio.NewWriter(w)}
	s.printf(`<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">
`, width, height, width, height)
	s.printf(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	s.text(float64(width)/2, 24, 15, "middle", "", title)
	return s
}
