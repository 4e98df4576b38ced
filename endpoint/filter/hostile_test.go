package filter

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// hostileFilters are evaluated on every hostile payload.
var hostileFilters = []string{
	`payload.total > 100`,
	`payload.items.exists(i, i.sku == "A")`,
	`has(payload.customer) && payload.customer.tier == "gold"`,
	`payload.?customer.?tier.orValue("") == "gold"`,
	`payload == payload`,
	`size(payload) > 0`,
	`payload.items.all(i, has(i.sku))`,
	`payload.items.map(i, i.sku).exists(s, s.startsWith("A"))`,
	`payload.items.filter(i, i.sku == "A").size() == 1`,
	`payload.sku.matches("^A+$")`,
	`payload.sku.contains("é") || payload.sku.endsWith("\u0000")`,
	`int(payload.total) > 0`,
	`uint(payload.total) > 0u`,
	`string(payload.total) != ""`,
	`payload.total + 1.0 > 0.0`,
	`payload.total / 0.0 > 1.0`,
	`payload.items[0].sku == "A"`,
	`payload.items[1000000] == 1`,
	`"sku" in payload && payload["sku"] in ["A", "B"]`,
	`payload.items.exists(a, payload.items.exists(b, a == b))`,
	`payload.customer.tier.size() + payload.items.size() > 2`,
	`type(payload) == map`,
	`payload`,
}

// hostilePayload is a random JSON payload: most often an object with the
// keys the filters read, of any type and repeated; else any hostileJSON
// value; one in eight wrapped in a chain of up to 100 arrays and objects
// (past MaxPayloadDepth); one in twenty cut short or with a byte changed.
func hostilePayload(r *rand.Rand) string {
	var b strings.Builder
	chain := 0
	if r.IntN(8) == 0 {
		chain = r.IntN(100)
	}
	closers := make([]string, 0, chain)
	for range chain {
		if r.IntN(2) == 0 {
			b.WriteString("[")
			closers = append(closers, "]")
		} else {
			b.WriteString(`{"items":`)
			closers = append(closers, "}")
		}
	}
	if r.IntN(10) < 7 {
		orderJSON(r, &b)
	} else {
		hostileJSON(r, &b, 0)
	}
	for i := len(closers) - 1; i >= 0; i-- {
		b.WriteString(closers[i])
	}
	payload := b.String()
	if r.IntN(20) == 0 {
		at := r.IntN(len(payload) + 1)
		if r.IntN(2) == 0 {
			return payload[:at]
		}
		return payload[:at] + string(rune(r.IntN(128))) + payload[min(at+1, len(payload)):]
	}
	return payload
}

// orderJSON writes an object with the keys the filters read: total (most
// often a number), items (most often a list of objects, most with a sku),
// customer, in random order, some twice, some missing.
func orderJSON(r *rand.Rand, b *strings.Builder) {
	b.WriteByte('{')
	for i := range 1 + r.IntN(5) {
		if i > 0 {
			b.WriteByte(',')
		}
		switch r.IntN(4) {
		case 0, 1:
			b.WriteString(`"total":`)
			if r.IntN(4) == 0 {
				hostileJSON(r, b, 0)
			} else {
				b.WriteString(hostileNumbers[r.IntN(len(hostileNumbers))])
			}
		case 2:
			b.WriteString(`"items":`)
			if r.IntN(5) == 0 {
				hostileJSON(r, b, 0)
				continue
			}
			b.WriteByte('[')
			for j := range r.IntN(6) {
				if j > 0 {
					b.WriteByte(',')
				}
				switch r.IntN(5) {
				case 0:
					hostileJSON(r, b, 0)
				case 1:
					b.WriteString(`{"name": "x"}`)
				default:
					b.WriteString(`{"sku":`)
					if r.IntN(3) == 0 {
						hostileJSON(r, b, 0)
					} else {
						b.WriteString([]string{`"A"`, `"B"`, `"a"`, `"A "`}[r.IntN(4)])
					}
					b.WriteByte('}')
				}
			}
			b.WriteByte(']')
		default:
			b.WriteString(`"customer":`)
			hostileJSON(r, b, 0)
		}
	}
	b.WriteByte('}')
}

// hostileNumbers are JSON numbers that break decoders.
var hostileNumbers = []string{"0", "-0", "1", "100", "100.0", "101", "-1", "1e308", "-1e308", "1e309", "5e-324",
	"1e-400", "0.1", "123456789012345678901234567890", "9007199254740993", "1E2", "-0.0e-0", "100.00000000000001"}

// hostileJSON writes a random JSON value to b: any shape, the keys the
// filters look for (repeated), and the numbers, strings and bytes that break
// decoders: 1e308, -0, huge and tiny numbers, long strings, escapes, lone
// surrogates, invalid UTF-8.
func hostileJSON(r *rand.Rand, b *strings.Builder, depth int) {
	keys := []string{"total", "customer", "tier", "items", "sku", "a", "", "total"}
	strs := []string{"A", "gold", "é", "\\u0000", "\\ud800", "\\u00e9\\uD83D\\uDE00", "\xff\xfe", "\\\"", "AAAA",
		"日本語", "\\n\\t", "🙂"}
	leaf := depth > 12 || r.IntN(3) == 0
	switch k := r.IntN(10); {
	case !leaf && k < 3:
		b.WriteByte('[')
		for i := range r.IntN(6) {
			if i > 0 {
				b.WriteByte(',')
			}
			hostileJSON(r, b, depth+1)
		}
		b.WriteByte(']')
	case !leaf && k < 7:
		b.WriteByte('{')
		for i := range r.IntN(6) {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(b, "%q:", keys[r.IntN(len(keys))])
			hostileJSON(r, b, depth+1)
		}
		b.WriteByte('}')
	case k == 7 && r.IntN(10) == 0:
		b.WriteString(`"` + strings.Repeat(strs[r.IntN(len(strs))], r.IntN(20_000)) + `"`)
	case k < 8:
		b.WriteString(`"` + strs[r.IntN(len(strs))] + `"`)
	case k == 8:
		b.WriteString(hostileNumbers[r.IntN(len(hostileNumbers))])
	default:
		b.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
	}
}

// hostileRounds is how many hostile payloads the property test tries.
const hostileRounds = 1000

func TestHostilePayloadsNeverPanicAndAgreeWithGo(t *testing.T) {
	filters := make([]*Filter, len(hostileFilters))
	for i, expr := range hostileFilters {
		filters[i] = mustCompile(t, expr)
	}
	r := rand.New(rand.NewPCG(26, 2026))
	for n := range hostileRounds {
		payload := hostilePayload(r)
		in, again := NewInput(orderEvent(payload)), NewInput(orderEvent(payload))
		for _, f := range filters {
			got, err := f.Match(in)
			if err != nil && got {
				t.Fatalf("payload %d, %s: true with error %v", n, f, err)
			}
			if err != nil && (len(err.Error()) > 300 || strings.ContainsAny(err.Error(), "\n\r")) {
				t.Fatalf("payload %d, %s: error not one short line: %q", n, f, err)
			}
			// The same event gives the same answer on another Input.
			gotAgain, errAgain := f.Match(again)
			if gotAgain != got || (err == nil) != (errAgain == nil) {
				t.Fatalf("payload %d, %s: %v, %v then %v, %v", n, f, got, err, gotAgain, errAgain)
			}
		}
		checkAgainstGo(t, n, payload, filters[0], filters[1], in)
	}
}

// checkAgainstGo compares two filters' answers with what Go computes from
// the same payload decoded with encoding/json: payload.total > 100 and
// payload.items.exists(i, i.sku == "A").
func checkAgainstGo(t *testing.T, n int, payload string, total, exists *Filter, in *Input) {
	t.Helper()
	var v any
	decodeErr := json.Unmarshal([]byte(payload), &v)
	switch {
	case decodeErr != nil:
	case len(payload) > MaxPayloadBytes:
		decodeErr = errors.New("too large")
	case checkDepth([]byte(payload), MaxPayloadDepth) != nil:
		decodeErr = errors.New("too deep")
	}
	obj, isObject := v.(map[string]any)

	got, err := total.Match(in)
	t1, isNumber := obj["total"].(float64)
	switch {
	case decodeErr != nil:
		if !errors.Is(err, ErrPayload) {
			t.Fatalf("payload %d: %s = %v, %v; Go: %v", n, total, got, err, decodeErr)
		}
	case isObject && isNumber:
		if err != nil || got != (t1 > 100) {
			t.Fatalf("payload %d: %s = %v, %v; Go: total %v", n, total, got, err, t1)
		}
	default:
		if err == nil {
			t.Fatalf("payload %d: %s = %v, nil; Go: no number total in %.80s", n, total, got, payload)
		}
	}

	got, err = exists.Match(in)
	if decodeErr != nil {
		if !errors.Is(err, ErrPayload) {
			t.Fatalf("payload %d: %s = %v, %v; Go: %v", n, exists, got, err, decodeErr)
		}
		return
	}
	// exists is true if any element is; else an error if any element is
	// one (not an object, no sku); else false. Equality of other types is
	// false, not an error. Over an object, exists visits its keys: strings,
	// which have no sku.
	items, isList := obj["items"].([]any)
	itemsObject, isMap := obj["items"].(map[string]any)
	want, wantErr := false, !isObject || !isList
	if isObject && isMap {
		wantErr = len(itemsObject) > 0
	}
	for _, item := range items {
		m, ok := item.(map[string]any)
		sku, has := m["sku"]
		switch {
		case !ok || !has:
			wantErr = true
		case sku == "A":
			want = true
		}
	}
	if want {
		wantErr = false
	}
	if got != want || (err != nil) != wantErr {
		t.Fatalf("payload %d: %s = %v, %v; Go: %v, error %v in %.200s", n, exists, got, err, want, wantErr, payload)
	}
}

func FuzzCompileMatch(f *testing.F) {
	for _, expr := range hostileFilters {
		f.Add(expr, []byte(`{"total": 150, "customer": {"tier": "gold"}, "items": [{"sku": "A"}]}`))
	}
	for _, payload := range []string{`[]`, `1e308`, `-0`, `"\ud800"`, `null`, "{\"a\":\xff}", `{"total":1,"total":"x"}`, `[[[[[[[[`} {
		f.Add(`payload.total > 100`, []byte(payload))
	}
	f.Add(`event_type.matches("a{1000}") || headers.?x.orValue("") == id`, []byte(`{}`))
	f.Add(`[1,2,3].map(x, x * 2).exists(y, y == int(payload.n))`, []byte(`{"n": 4}`))
	f.Add(`payload.a.b.c.d.e.f == duration("1s")`, []byte(`{"a":{}}`))
	f.Fuzz(func(t *testing.T, expr string, payload []byte) {
		filter, err := Compile(expr)
		if err != nil {
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile(%q): %v is no *CompileError", expr, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("Compile(%q): not one line: %q", expr, err)
			}
			return
		}
		got, err := filter.Match(NewInput(orderEvent(string(payload))))
		if err != nil && got {
			t.Fatalf("%q on %q: true with error %v", expr, payload, err)
		}
	})
}
