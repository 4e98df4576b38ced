// Package filter evaluates an endpoint's content filter: a CEL expression
// (https://cel.dev) over an event's type, aggregate, id, headers and JSON
// payload that says whether the endpoint wants the event.
//
// An endpoint's filter is compiled once (Compile, or Check to validate one
// for `postbox endpoints add|update`): it is parsed and type-checked against
// these variables, and must have type bool (or dyn, which must then be a
// bool when evaluated):
//
//	event_type      string               "order.created"
//	aggregate_type  string               "order"
//	aggregate_id    string               "42"
//	id              string               the event id, "0190c2…"
//	headers         map(string, string)  the event's headers, keys as written
//	payload         dyn                  the JSON payload, decoded
//
// CEL's standard functions and macros are there (startsWith, endsWith,
// contains, matches, size, in, has(), exists, all, exists_one, map, filter),
// and optional values (payload.?customer.?tier.orValue("") == "gold",
// headers.?tenant == optional.of("acme")). Nothing a filter can call reaches
// outside the event: no I/O, no clock, no side effects.
//
// For each event the fan-out builds one Input (NewInput) and hands it to the
// filter of every endpoint the event's type matches (Filter.Match). The
// payload is decoded at most once per Input, and only when an evaluation
// reaches the variable payload: a filter on event_type alone never decodes
// it, nor does `event_type == "a" && payload.x > 1` for an event of another
// type.
//
// # The payload
//
// The payload is decoded as JSON the way CEL sees JSON (google.protobuf.Value):
// objects are map(string, dyn), arrays list(dyn), strings string, true and
// false bool, null null, and every number a double (float64). CEL compares
// numbers across types, so payload.total > 100 and payload.total == 100 hold
// for the JSON numbers 100, 100.0 and 1e2 alike; arithmetic does not mix
// types, so write payload.total * 1.2, not * 1, or convert: int(payload.n) % 2
// == 0. Integers beyond 2^53 lose precision: compare such ids as strings.
// A repeated object key keeps its last value.
//
// A payload that cannot be decoded makes `payload` an error, so does any
// filter that reaches it: a payload over MaxPayloadBytes, one nested deeper
// than MaxPayloadDepth, one that is not valid JSON or holds a number outside
// float64's range. Those errors match ErrPayload.
//
// # Errors mean "no match"
//
// Match returns an error when the evaluation fails: a key the payload lacks
// (payload.customer.tier where customer has no tier; use has() or ?.), a
// header the event lacks (headers["x"]; use "x" in headers or headers.?x), a
// type mismatch (payload.total > 100 where total is a string), the cost limit
// (ErrCostLimit), or an undecodable payload (ErrPayload). The caller treats an
// error as "no match": the event is not delivered to that endpoint, and the
// caller counts and logs the error with the endpoint and event id. CEL's
// logical operators absorb errors where the result does not depend on them:
// `false && payload.x` is false and `true || payload.x` is true.
//
// # Bounds
//
// An expression is at most MaxExpressionLength bytes. Each evaluation is
// charged by CEL's cost model (about one unit per operation and per ten
// bytes a string function reads; a regular expression by the text's length
// times the pattern's size, checked before it runs) and stops with
// ErrCostLimit past CostLimit. Compile refuses an expression that CEL's
// cost estimate says goes past the limit on every event, or on some
// whatever their headers and payload (nested comprehensions over constant
// lists), and a matches whose pattern is not a constant.
package filter
