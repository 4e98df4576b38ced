package console

import (
	"strconv"
	"time"
)

// The chart's geometry, in SVG user units: two rows of chartMinutes bars,
// the deliveries above, the failures below.
const (
	barStep   = 10
	barWidth  = 8
	rowHeight = 60
	rowGap    = 20
)

// chart is the overview's chart of the last hour, drawn as SVG by the
// template (no script).
type chart struct {
	Bars           []bar
	Width, Height  int
	FailedTop      int
	MaxDelivered   int64
	MaxFailed      int64
	TotalDelivered int64
	TotalFailed    int64
}

// bar is one minute: two rectangles, their heights scaled to the row's
// largest value.
type bar struct {
	minute
	X                       int
	DeliveredY, DeliveredH  int
	FailedY, FailedH        int
	DeliveredTip, FailedTip string
}

func newChart(minutes []minute) chart {
	c := chart{Width: len(minutes) * barStep, Height: 2*rowHeight + rowGap, FailedTop: rowHeight + rowGap}
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
		return max(1, int(v*rowHeight/most))
	}
	for i, m := range minutes {
		b := bar{minute: m, X: i * barStep}
		b.DeliveredH = scale(m.Delivered, c.MaxDelivered)
		b.DeliveredY = rowHeight - b.DeliveredH
		b.FailedH = scale(m.Failed, c.MaxFailed)
		b.FailedY = c.FailedTop
		at := m.Start.UTC().Format(time.TimeOnly[:5])
		b.DeliveredTip = at + " UTC: " + strconv.FormatInt(m.Delivered, 10) + " delivered"
		b.FailedTip = at + " UTC: " + strconv.FormatInt(m.Failed, 10) + " failed"
		c.Bars = append(c.Bars, b)
	}
	return c
}
