package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
	"time"
)

// series is one line of a plot.
type series struct {
	name string
	xs   []float64
	ys   []float64
	dash bool
}

// plot is a line chart with a logarithmic x axis, written as SVG by hand.
type plot struct {
	title  string
	xLabel string
	yLabel string
	xTick  func(float64) string // label of an x tick (a power of ten)
	yMax   float64              // 0: from the data
	yFmt   string               // format of y tick labels
	lines  []series
}

var palette = []string{"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// Geometry of every plot, in SVG user units.
const (
	plotW, plotH                       = 760, 440
	marginL, marginR, marginT, marginB = 70, 220, 40, 55
)

// svg renders the plot.
func (p plot) svg() string {
	var xs, ys []float64
	for _, s := range p.lines {
		for i, x := range s.xs {
			if x > 0 {
				xs = append(xs, x)
				ys = append(ys, s.ys[i])
			}
		}
	}
	if len(xs) == 0 {
		xs, ys = []float64{1, 10}, []float64{0, 1}
	}
	lo := math.Pow(10, math.Floor(math.Log10(slices.Min(xs))))
	hi := math.Pow(10, math.Ceil(math.Log10(slices.Max(xs))))
	if hi <= lo {
		hi = lo * 10
	}
	yMax := p.yMax
	if yMax == 0 {
		yMax = niceCeil(slices.Max(ys))
	}
	w, h := float64(plotW-marginL-marginR), float64(plotH-marginT-marginB)
	px := func(x float64) float64 {
		return marginL + w*(math.Log10(x)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
	}
	py := func(y float64) float64 { return marginT + h*(1-y/yMax) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", marginL, html.EscapeString(p.title))
	// Grid and ticks.
	for x := lo; x <= hi*1.0001; x *= 10 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", px(x), marginT, px(x), marginT+h)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(x), marginT+h+18, html.EscapeString(p.xTick(x)))
		for m := 2.0; m < 10 && x*m < hi; m++ {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#aaa"/>`+"\n", px(x*m), marginT+h, px(x*m), marginT+h+4)
		}
	}
	for i := 0; i <= 5; i++ {
		y := yMax * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", marginL, py(y), marginL+w, py(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-6, py(y)+4, fmt.Sprintf(p.yFmt, y))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="#333"/>`+"\n", marginL, marginT, w, h)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", marginL+w/2, plotH-12, html.EscapeString(p.xLabel))
	fmt.Fprintf(&b, `<text transform="translate(18,%.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", marginT+h/2, html.EscapeString(p.yLabel))
	// Lines and legend.
	for i, s := range p.lines {
		color := palette[i%len(palette)]
		var pts []string
		for j, x := range s.xs {
			if x > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(x), py(min(s.ys[j], yMax))))
			}
		}
		dash := ""
		if s.dash {
			dash = ` stroke-dasharray="6,4"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", color, dash, strings.Join(pts, " "))
		if len(pts) <= 12 {
			for _, pt := range pts {
				x, y, _ := strings.Cut(pt, ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", x, y, color)
			}
		}
		ly := marginT + 10 + 20*i
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", marginL+w+12, ly, marginL+w+36, ly, color, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", marginL+w+42, ly+4, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// cdfPlot plots the distribution of each library's hand-over times on one store.
func cdfPlot(store string, rs []handOverResult) plot {
	p := plot{
		title:  fmt.Sprintf("Hand-over latency on %s (CDF, %d samples each)", storeTitle(store), samplesOf(rs)),
		xLabel: "release call to the waiter's acquire returning (log scale)",
		yLabel: "fraction of hand-overs",
		xTick:  durationTick,
		yMax:   1,
		yFmt:   "%.1f",
	}
	for _, r := range rs {
		t := slices.Clone(r.Times)
		slices.Sort(t)
		s := series{name: r.Library, dash: !isSimba(r.ID)}
		for i, d := range t {
			s.xs = append(s.xs, float64(d)/float64(time.Millisecond))
			s.ys = append(s.ys, float64(i+1)/float64(len(t)))
		}
		p.lines = append(p.lines, s)
	}
	return p
}

func samplesOf(rs []handOverResult) int {
	if len(rs) == 0 {
		return 0
	}
	return rs[0].Samples
}

// durationTick labels a power of ten of milliseconds.
func durationTick(x float64) string {
	switch {
	case x >= 1000:
		return fmt.Sprintf("%gs", x/1000)
	case x >= 1:
		return fmt.Sprintf("%gms", x)
	default:
		return fmt.Sprintf("%gµs", x*1000)
	}
}

// scalePlot plots the live heap per contender against the number of contenders.
func scalePlot(points []scaleResult) plot {
	p := plot{
		title:  "Memory per contender (Lockers holding a mutex each, one process)",
		xLabel: "contenders (log scale)",
		yLabel: "KB per contender (after GC)",
		xTick:  func(x float64) string { return fmt.Sprintf("%g", x) },
		yFmt:   "%.1f",
	}
	byStore := map[string]*[2]series{}
	var order []string
	for _, r := range points {
		s := byStore[r.Store]
		if s == nil {
			s = &[2]series{
				{name: storeTitle(r.Store) + ": heap"},
				{name: storeTitle(r.Store) + ": heap + stacks", dash: true},
			}
			byStore[r.Store] = s
			order = append(order, r.Store)
		}
		s[0].xs = append(s[0].xs, float64(r.Contenders))
		s[0].ys = append(s[0].ys, r.HeapBytes/1024)
		s[1].xs = append(s[1].xs, float64(r.Contenders))
		s[1].ys = append(s[1].ys, (r.HeapBytes+r.StackBytes)/1024)
	}
	ymax := 10.0 // the goal
	for _, st := range order {
		for _, s := range byStore[st] {
			p.lines = append(p.lines, s)
			for _, y := range s.ys {
				ymax = max(ymax, y)
			}
		}
	}
	p.yMax = niceCeil(ymax * 1.1)
	lo, hi := math.Inf(1), 0.0
	for _, r := range points {
		lo, hi = min(lo, float64(r.Contenders)), max(hi, float64(r.Contenders))
	}
	if hi > 0 {
		p.lines = append(p.lines, series{name: "goal: 10 KB heap", xs: []float64{lo, hi}, ys: []float64{10, 10}, dash: true})
	}
	return p
}
