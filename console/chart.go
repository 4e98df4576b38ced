package console

import (
	"strconv"
	"time"
)

// The chart's geometry: two rows of bars, the deliveries above, the
// failures below, then the time axis. Heights are in pixels; positions
// along the hour are percentages of the chart's width, so that the labels
// keep their shape whatever the width.
const (
	rowHeight  = 60
	rowGap     = 20
	axisLabelY = 2*rowHeight + rowGap + 16
	chartH     = axisLabelY + 6
	// tickEvery is the time between two labels of the time axis.
	tickEvery = 10 * time.Minute
)

// chart is the overview's chart of the last hour, drawn as SVG by the
// template (no script).
type chart struct {
	Bars           []bar
	Ticks          []tick
	Height         int
	FailedTop      int
	AxisY          int
	TickEnd        int
	LabelY         int
	BarWidth       string
	MaxDelivered   int64
	MaxFailed      int64
	TotalDelivered int64
	TotalFailed    int64
}

// bar is one minute: two rectangles, their heights scaled to the row's
// largest value.
type bar struct {
	minute
	X                       string
	DeliveredY, DeliveredH  int
	FailedY, FailedH        int
	DeliveredTip, FailedTip string
}

// tick is a label of the time axis: a time (UTC, "15:04") where a minute
// starts, at X; Anchor keeps the first and the last inside the chart.
type tick struct {
	X      string
	Label  string
	Anchor string
}

// percent writes f (0 to 1) as an SVG percentage.
func percent(f float64) string {
	return strconv.FormatFloat(100*f, 'f', 3, 64) + "%"
}

func newChart(minutes []minute) chart {
	c := chart{
		Height: chartH, FailedTop: rowHeight + rowGap, AxisY: 2*rowHeight + rowGap, TickEnd: 2*rowHeight + rowGap + 4, LabelY: axisLabelY,
		BarWidth: percent(0.8 / float64(max(1, len(minutes)))),
	}
	for _, m := range minutes {
		c.MaxDelivered = max(c.MaxDelivered, m.Delivered)
		c.MaxFailed = max(c.MaxFailed, m.Failed)
		c.TotalDelivered += m.Delivered
		c.TotalFailed += m.Failed
	}
	scale := func(v, most int64) int {
		if most == 0 || v == 0 {
			return 0
		}
		return max(1, int(float64(v)*rowHeight/float64(most)))
	}
	step := 1 / float64(max(1, len(minutes)))
	for i, m := range minutes {
		b := bar{minute: m, X: percent(float64(i) * step)}
		b.DeliveredH = scale(m.Delivered, c.MaxDelivered)
		b.DeliveredY = rowHeight - b.DeliveredH
		b.FailedH = scale(m.Failed, c.MaxFailed)
		b.FailedY = c.FailedTop
		at := m.Start.UTC().Format(time.TimeOnly[:5])
		b.DeliveredTip = at + " UTC: " + strconv.FormatInt(m.Delivered, 10) + " delivered"
		b.FailedTip = at + " UTC: " + strconv.FormatInt(m.Failed, 10) + " failed"
		c.Bars = append(c.Bars, b)
	}
	c.Ticks = ticks(minutes, step)
	return c
}

// ticks labels the minutes that start a tickEvery, and the end of the
// last minute when it does.
func ticks(minutes []minute, step float64) []tick {
	var out []tick
	for i := 0; i <= len(minutes); i++ {
		var at time.Time
		if i < len(minutes) {
			at = minutes[i].Start
		} else if i > 0 {
			at = minutes[i-1].Start.Add(time.Minute)
		}
		if at.IsZero() || at.UTC().Truncate(tickEvery) != at.UTC() {
			continue
		}
		t := tick{X: percent(float64(i) * step), Label: at.UTC().Format(time.TimeOnly[:5]), Anchor: "middle"}
		switch {
		case i < 3:
			t.Anchor = "start"
		case i > len(minutes)-3:
			t.Anchor = "end"
		}
		out = append(out, t)
	}
	return out
}
