package sinktest_test

import (
	"fmt"
	"testing"

	"github.com/postbox-go/postbox/postboxtest/sinktest"
)

// The suite passes for a correct sink, with and without de-duplication.
func TestRunMemory(t *testing.T) {
	for _, dedup := range []bool{false, true} {
		t.Run(fmt.Sprintf("dedup=%v", dedup), func(t *testing.T) {
			sinktest.Run(t, sinktest.Harness{
				New: func(t *testing.T) sinktest.Destination {
					m := &memory{dedup: dedup, max: 1 << 10}
					return sinktest.Destination{Sink: m, Received: m.received, MaxPayload: m.max}
				},
				Features: sinktest.Features{Deduplicates: dedup, OrderedPerAggregate: true, CarriesHeaders: true},
				Refused:  []sinktest.Header{{Name: "Authorization", Value: "Bearer forged"}},
			})
		})
	}
}
