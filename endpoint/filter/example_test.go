package filter_test

import (
	"errors"
	"fmt"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint/filter"
)

func Example() {
	// At `postbox endpoints add`: compile (or Check) the endpoint's filter.
	f, err := filter.Compile(`event_type == "order.created" && payload.total > 100`)
	if err != nil {
		fmt.Println(err)
		return
	}

	// In the fan-out: one Input per event, shared by every endpoint's filter.
	in := filter.NewInput(postbox.Event{
		EventType: "order.created",
		Payload:   []byte(`{"total": 149.9, "items": [{"sku": "A-100"}]}`),
	})
	ok, err := f.Match(in)
	fmt.Println(ok, err)
	// Output: true <nil>
}

func ExampleCheck() {
	fmt.Println(filter.Check(`has(payload.customer) && paylod.customer.tier == "gold"`))
	fmt.Println(filter.Check(`payload.total + 1`))
	// Output:
	// filter: 1:26: undeclared reference to 'paylod' (did you mean 'payload'?)
	// filter: 1:15: expression has type int, want bool
}

func ExampleFilter_Match_errors() {
	f, _ := filter.Compile(`payload.customer.tier == "gold"`)
	for _, payload := range []string{
		`{"customer": {"tier": "gold"}}`,
		`{"customer": {}}`,
		`{"customer": `,
	} {
		ok, err := f.Match(filter.NewInput(postbox.Event{EventType: "order.created", Payload: []byte(payload)}))
		switch {
		case errors.Is(err, filter.ErrPayload):
			fmt.Println("no match (payload):", err)
		case err != nil:
			fmt.Println("no match, filter error:", err)
		default:
			fmt.Println("match:", ok)
		}
	}
	// Output:
	// match: true
	// no match, filter error: filter: 1:17: no such key: tier
	// no match (payload): filter: 1:17: payload not decodable: not valid JSON at byte 13
}
