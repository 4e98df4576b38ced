package filter

import (
	"strings"
	"testing"
)

// benchOrder is a typical order payload, about 300 bytes.
const benchOrder = `{"order_id":"ord_8f3a2c","customer":{"id":"cus_1942","tier":"gold","email":"ana@example.com"},` +
	`"currency":"EUR","total":149.9,"items":[{"sku":"A-100","qty":2,"price":49.95},` +
	`{"sku":"B-200","qty":1,"price":50}],"shipping":{"country":"PT","method":"express"},"created_at":"2026-05-01T10:00:00Z"}`

// benchMatch measures NewInput and one Match per op: what one event costs
// one endpoint with this filter, the payload's decoding included.
func benchMatch(b *testing.B, expr string, want bool) {
	f := mustCompile(b, expr)
	ev := orderEvent(benchOrder)
	b.ReportAllocs()
	for b.Loop() {
		got, err := f.Match(NewInput(ev))
		if err != nil || got != want {
			b.Fatalf("%s: %v, %v", expr, got, err)
		}
	}
}

func BenchmarkTypicalFilter(b *testing.B) {
	benchMatch(b, `event_type == "order.created" && payload.total > 100`, true)
}

func BenchmarkTypeOnlyFilter(b *testing.B) {
	benchMatch(b, `event_type.startsWith("order.")`, true)
}

func BenchmarkExistsFilter(b *testing.B) {
	benchMatch(b, `has(payload.customer) && payload.customer.tier == "gold" && payload.items.exists(i, i.sku == "B-200")`, true)
}

// BenchmarkSharedInput is one event and ten endpoints' filters: one
// NewInput, one decode, ten Matches per op.
func BenchmarkSharedInput(b *testing.B) {
	exprs := []string{
		`event_type == "order.created" && payload.total > 100`,
		`event_type.startsWith("order.")`,
		`aggregate_type == "order"`,
		`headers["tenant"] == "acme"`,
		`payload.customer.tier == "gold"`,
		`payload.items.exists(i, i.sku == "A-100")`,
		`payload.currency in ["EUR", "USD"]`,
		`payload.shipping.country == "PT" && payload.shipping.method == "express"`,
		`payload.?discount.?code.orValue("") == ""`,
		`event_type.matches("^order\\.(created|paid)$")`,
	}
	filters := make([]*Filter, len(exprs))
	for i, expr := range exprs {
		filters[i] = mustCompile(b, expr)
	}
	ev := orderEvent(benchOrder)
	b.ReportAllocs()
	for b.Loop() {
		in := NewInput(ev)
		for _, f := range filters {
			if got, err := f.Match(in); err != nil || !got {
				b.Fatalf("%s: %v, %v", f, got, err)
			}
		}
	}
}

// BenchmarkCostLimitReached is the worst an evaluation can cost: one that
// runs until CostLimit stops it (the payload decoded once, outside the
// loop).
func BenchmarkCostLimitReached(b *testing.B) {
	payload := `{"items":[` + strings.TrimSuffix(strings.Repeat(`{"sku":"x"},`, 50_000), ",") + `]}`
	f := mustCompile(b, `payload.items.all(i, i.sku == "x")`)
	in := NewInput(orderEvent(payload))
	if _, err := f.Match(in); err == nil {
		b.Fatal("the cost limit was not reached")
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Match(in); err == nil {
			b.Fatal("the cost limit was not reached")
		}
	}
}

// BenchmarkDecodeLargestPayload is the decoding of a payload of about
// MaxPayloadBytes, paid once per event by the first filter that reads it.
func BenchmarkDecodeLargestPayload(b *testing.B) {
	payload := []byte(`{"items":[` + strings.TrimSuffix(strings.Repeat(`{"sku":"A-100","qty":2,"price":49.95},`, MaxPayloadBytes/39), ",") + `]}`)
	if len(payload) > MaxPayloadBytes {
		b.Fatalf("payload of %d bytes", len(payload))
	}
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := decodePayload(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	for b.Loop() {
		mustCompile(b, `has(payload.customer) && payload.customer.tier == "gold" && payload.items.exists(i, i.sku == "B-200")`)
	}
}
