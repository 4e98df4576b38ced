package order

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// ReportEveryDefault is how often Produce reports its progress when
// ProduceParams.ReportEvery is zero.
const ReportEveryDefault = time.Second

// tickMin bounds the pacing ticker: above 1000 orders a second, several
// orders are written per tick.
const tickMin = time.Millisecond

// ProduceParams configures Produce.
type ProduceParams struct {
	// Rate is the number of orders per second, above zero. Produce keeps
	// to it on average, catching up after a slow write, and never goes
	// faster; a database that cannot keep up makes it slower.
	Rate float64
	// Count is the number of orders to create; zero means until ctx ends.
	Count int
	// Report, when not nil, is called every ReportEvery with the progress.
	Report func(Progress)
	// ReportEvery is the reporting period (default ReportEveryDefault).
	ReportEvery time.Duration
	// NewOrder makes each order (default: a random user and amount).
	NewOrder func() Order
}

// Progress is what Produce reports.
type Progress struct {
	// Created is the number of orders created since the previous report.
	Created int
	// Total is the number of orders created so far.
	Total int
	// Elapsed is the time since Produce started.
	Elapsed time.Duration
}

// RandomOrder returns an order of a random user (u_1 to u_1000) for a
// random amount (1.00 to 999.99).
func RandomOrder() Order {
	return Order{UserID: fmt.Sprintf("u_%d", 1+rand.IntN(1000)), Amount: 100 + rand.Int64N(99900)}
}

// Produce creates orders, each with its event (see Create), at p.Rate per
// second until p.Count are created or ctx ends, and returns how many it
// created. The first order is created at once, the n-th (n-1)/Rate seconds
// later. The end of ctx is a normal stop, not an error: the order being
// written is finished first, so the count returned is exact. A failed
// Create stops Produce with its error.
func (s *Service) Produce(ctx context.Context, p ProduceParams) (int, error) {
	if !(p.Rate > 0) || math.IsInf(p.Rate, 0) {
		return 0, fmt.Errorf("order: produce: rate %v must be a positive number", p.Rate)
	}
	if p.Count < 0 {
		return 0, fmt.Errorf("order: produce: count %d is negative", p.Count)
	}
	if p.ReportEvery <= 0 {
		p.ReportEvery = ReportEveryDefault
	}
	if p.NewOrder == nil {
		p.NewOrder = RandomOrder
	}
	// Float64 keeps a low rate's interval from overflowing a Duration.
	interval := time.Duration(min(float64(time.Second)/p.Rate, float64(time.Hour)))
	tick := time.NewTicker(max(interval, tickMin))
	defer tick.Stop()
	reportTick := time.NewTicker(p.ReportEvery)
	defer reportTick.Stop()

	start := time.Now()
	total, reported := 0, 0
	report := func() {
		if p.Report != nil {
			p.Report(Progress{Created: total - reported, Total: total, Elapsed: time.Since(start)})
		}
		reported = total
	}
	for {
		// Orders due by now: the first at once, then one per interval.
		due := int(min(time.Since(start).Seconds()*p.Rate, math.MaxInt32)) + 1
		if p.Count > 0 {
			due = min(due, p.Count)
		}
		for total < due {
			if ctx.Err() != nil {
				return total, nil
			}
			// An order under way is finished even if ctx ends meanwhile,
			// so the count is exact and no transaction is cut short.
			if _, err := s.Create(context.WithoutCancel(ctx), p.NewOrder()); err != nil {
				return total, err
			}
			total++
			select {
			case <-reportTick.C: // report even while catching up
				report()
			default:
			}
		}
		if p.Count > 0 && total >= p.Count {
			return total, nil
		}
		select {
		case <-ctx.Done():
			return total, nil
		case <-reportTick.C:
			report()
		case <-tick.C:
		}
	}
}
