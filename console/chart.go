package console

import (
	"fmt"
	"time"

	"inbox/inbox"
)

// hour is one bar group of the chart.
type hour struct {
	Start   time.Time
	Arrived int64 // rows received in the hour
	Parked  int64 // rows parked in the hour
	Refused int64 // keys still missed whose first refusal was in the hour
}

// chart is the overview's rows per hour, drawn as inline SVG on the
// server.
type chart struct {
	Hours []hour
}

// addRefusals counts each missed key in the hour of its first refusal;
// one outside the chart's hours is left out.
func (ch *chart) addRefusals(missed []inbox.Refusal) {
	if len(ch.Hours) == 0 {
		return
	}
	first := ch.Hours[0].Start
	for _, r := range missed {
		if i := int(r.First.Sub(first) / time.Hour); !r.First.Before(first) && i < len(ch.Hours) {
			ch.Hours[i].Refused++
		}
	}
}

// The chart's geometry, in SVG user units, and its series' colors: the
// stylesheet's legend uses the same ones.
const (
	chartWidth, chartHeight = 960, 240
	plotLeft, plotTop       = 48, 12
	plotBottom              = chartHeight - 28
	plotRight               = chartWidth - 8
	// ArrivedFill, ParkedFill and RefusedFill are the series' colors.
	ArrivedFill = "#3b82c4"
	ParkedFill  = "#dd8a1a"
	RefusedFill = "#c53030"
)

type bar struct {
	X, Y, W, H int
	Fill       string
	Title      string
}

type tick struct {
	X, Y  int
	LineY int // a grid line's height, for the value ticks
	Label string
}

// svg is what the template draws.
type svg struct {
	Width, Height                        int
	Left, Top, Right, Bottom             int
	Bars                                 []bar
	XTicks, YTicks                       []tick
	ArrivedFill, ParkedFill, RefusedFill string
	Max                                  int64
	Empty                                bool
	MidX, MidY                           int
}

// SVG lays the chart out: three bars an hour (received, parked, refused),
// scaled to the largest count, an hour label every three hours.
func (ch chart) SVG() svg {
	s := svg{Width: chartWidth, Height: chartHeight, Left: plotLeft, Top: plotTop, Right: plotRight, Bottom: plotBottom,
		ArrivedFill: ArrivedFill, ParkedFill: ParkedFill, RefusedFill: RefusedFill, MidX: chartWidth / 2, MidY: chartHeight / 2}
	for _, h := range ch.Hours {
		s.Max = max(s.Max, h.Arrived, h.Parked, h.Refused)
	}
	s.Empty = s.Max == 0
	top := niceCeil(s.Max)
	if len(ch.Hours) == 0 {
		return s
	}
	slot := (plotRight - plotLeft) / len(ch.Hours)
	barW := max((slot-4)/3, 1)
	height := func(n int64) int {
		if n == 0 {
			return 0
		}
		return max(int(n*int64(plotBottom-plotTop)/top), 1)
	}
	for i, h := range ch.Hours {
		x := plotLeft + i*slot + 2
		label := h.Start.Format("15:04") + "–" + h.Start.Add(time.Hour).Format("15:04") + " UTC: "
		for j, series := range []struct {
			n    int64
			fill string
			what string
		}{{h.Arrived, ArrivedFill, "received"}, {h.Parked, ParkedFill, "parked"}, {h.Refused, RefusedFill, "refused, still missed"}} {
			hh := height(series.n)
			s.Bars = append(s.Bars, bar{X: x + j*barW, Y: plotBottom - hh, W: barW, H: hh, Fill: series.fill,
				Title: fmt.Sprintf("%s%d %s", label, series.n, series.what)})
		}
		if i%3 == 0 {
			s.XTicks = append(s.XTicks, tick{X: x, Y: plotBottom + 16, Label: h.Start.Format("15:04")})
		}
	}
	for _, v := range []int64{0, top / 2, top} {
		y := plotBottom - int(v*int64(plotBottom-plotTop)/top)
		s.YTicks = append(s.YTicks, tick{X: plotLeft - 6, Y: y + 4, LineY: y, Label: thousands(v)})
	}
	return s
}

// niceCeil is the axis' top for a largest count of n: n rounded up to 2,
// 4 or 10 times a power of ten, so its half is whole.
func niceCeil(n int64) int64 {
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{2, 4, 10} {
			if m*p >= n {
				return m * p
			}
		}
	}
}
