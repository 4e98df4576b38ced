package filter

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
)

// orderEvent is an order.created event with payload.
func orderEvent(payload string) postbox.Event {
	return postbox.Event{
		ID:            uuid.MustParse("0190c2f4-7a3b-7c00-8000-000000000001"),
		AggregateType: "order",
		AggregateID:   "42",
		EventType:     "order.created",
		Payload:       []byte(payload),
		Headers:       map[string]string{"tenant": "acme", "traceparent": "00-abc-def-01"},
	}
}

func mustCompile(t testing.TB, expr string) *Filter {
	t.Helper()
	f, err := Compile(expr)
	if err != nil {
		t.Fatalf("Compile(%q): %v", expr, err)
	}
	return f
}

func TestCompileErrorsNamePositions(t *testing.T) {
	for _, tc := range []struct {
		expr         string
		line, column int
		msg          string // a part of the message
	}{
		{"paylod.total > 100", 1, 1, "undeclared reference to 'paylod'"},
		{`event_type == "a" && paylod.x > 1`, 1, 22, "undeclared reference to 'paylod'"},
		{"event_type ==", 1, 14, "Syntax error"},
		{`event_type == "a" (`, 1, 19, "Syntax error"},
		{"event_type == \"a\" &&\n  payload.x > 1 &&\n  exec(\"rm\")", 3, 7, "undeclared reference to 'exec'"},
		{"1 + 1", 1, 3, "expression has type int, want bool"},
		{`"order." + event_type`, 1, 10, "expression has type string, want bool"},
		{"event_type == 1", 1, 12, "no matching overload for '_==_' applied to '(string, int)'"},
		{`headers["x"] == 1`, 1, 14, "no matching overload"},
		{`payload.note.matches(payload.pattern)`, 1, 29, "the pattern of matches must be a constant string"},
		{`matches(payload.note, event_type)`, 1, 23, "the pattern of matches must be a constant string"},
		{`event_type.matches("order.(")`, 1, 20, "invalid matches argument"},
		{`duration("1x") > duration("1s")`, 1, 10, "invalid duration argument"},
	} {
		err := Check(tc.expr)
		var ce *CompileError
		if !errors.As(err, &ce) {
			t.Errorf("Check(%q) = %v, want a *CompileError", tc.expr, err)
			continue
		}
		if ce.Line != tc.line || ce.Column != tc.column || !strings.Contains(ce.Msg, tc.msg) {
			t.Errorf("Check(%q) = %d:%d %q, want %d:%d and a message with %q", tc.expr, ce.Line, ce.Column, ce.Msg, tc.line, tc.column, tc.msg)
		}
		if strings.ContainsAny(err.Error(), "\n\r") {
			t.Errorf("Check(%q): the message is not one line: %q", tc.expr, err)
		}
	}
}

func TestCompileErrorMessageIsFitForTheCLI(t *testing.T) {
	err := Check("payload.total > 1 && paylod.x")
	want := "filter: 1:22: undeclared reference to 'paylod' (did you mean 'payload'?)"
	if err == nil || err.Error() != want {
		t.Fatalf("Check: %v, want %q", err, want)
	}
	err = Check("paylod.x && foo(1)")
	want = "filter: 1:1: undeclared reference to 'paylod' (did you mean 'payload'?) (and 1 more)"
	if err == nil || err.Error() != want {
		t.Fatalf("Check: %v, want %q", err, want)
	}
	// A control character in the expression does not break the line.
	err = Check("event_type == \x01")
	if err == nil || strings.ContainsRune(err.Error(), '\x01') {
		t.Fatalf("Check: %q, want an error without the control character", err)
	}
}

func TestCompileRefusesWholeExpressions(t *testing.T) {
	tenTimes := func(body string) string { return "[0,1,2,3,4,5,6,7,8,9].all(a" + body + ", " }
	nested := tenTimes("1") + tenTimes("2") + tenTimes("3") + tenTimes("4") + tenTimes("5") + "true" + strings.Repeat(")", 5)
	for _, tc := range []struct {
		name, expr, msg string
	}{
		{"empty", "", "filter: expression is empty"},
		{"whitespace", " \n\t ", "filter: expression is empty"},
		{"too long", `event_type == "` + strings.Repeat("a", MaxExpressionLength) + `"`, "filter: expression is 4112 bytes, over the limit of 4096"},
		{"not UTF-8", "event_type == \"\xff\"", "filter: expression is not valid UTF-8"},
		{"too costly", nested, "filter: estimated cost is up to"},
		{"too costly on some events", `event_type == "x" && ` + nested, "filter: estimated cost is up to"},
	} {
		err := Check(tc.expr)
		var ce *CompileError
		if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), tc.msg) || ce.Line != 0 {
			t.Errorf("%s: Check = %v, want a *CompileError %q… without a position", tc.name, err, tc.msg)
		}
	}
	// At the limit is fine.
	atLimit := `event_type == "` + strings.Repeat("a", MaxExpressionLength-16) + `"`
	if len(atLimit) != MaxExpressionLength {
		t.Fatalf("test expression is %d bytes", len(atLimit))
	}
	if err := Check(atLimit); err != nil {
		t.Fatalf("Check of %d bytes: %v", len(atLimit), err)
	}
	// A nesting too deep for the parser is an error, not a crash.
	if err := Check(strings.Repeat("(", 1000) + "true" + strings.Repeat(")", 1000)); err == nil {
		t.Fatal("Check of 1,000 nested parentheses: no error")
	}
}

func TestMatchTypicalFilters(t *testing.T) {
	const gold = `{"total": 150, "customer": {"tier": "gold"}, "items": [{"sku": "B"}, {"sku": "A"}]}`
	const silver = `{"total": 99.5, "customer": {"tier": "silver"}, "items": [{"sku": "B"}]}`
	const bare = `{"total": 100.5, "items": []}`
	for _, tc := range []struct {
		expr    string
		payload string
		want    bool
	}{
		{`event_type == "order.created"`, gold, true},
		{`event_type == "order.paid"`, gold, false},
		{`event_type.startsWith("order.")`, gold, true},
		{`event_type.endsWith(".paid")`, gold, false},
		{`event_type in ["order.created", "order.paid"]`, gold, true},
		{`event_type.matches("^order\\.(created|paid)$")`, gold, true},
		{`aggregate_type == "order" && aggregate_id == "42"`, gold, true},
		{`aggregate_type == "invoice"`, gold, false},
		{`id == "0190c2f4-7a3b-7c00-8000-000000000001"`, gold, true},
		{`headers["tenant"] == "acme"`, gold, true},
		{`headers["tenant"] == "globex"`, gold, false},
		{`"tenant" in headers && headers["tenant"] == "acme"`, gold, true},
		{`"region" in headers && headers["region"] == "eu"`, gold, false},
		{`headers.?region.orValue("eu") == "eu"`, gold, true},
		{`has(payload.customer) && payload.customer.tier == "gold"`, gold, true},
		{`has(payload.customer) && payload.customer.tier == "gold"`, silver, false},
		{`has(payload.customer) && payload.customer.tier == "gold"`, bare, false},
		{`payload.?customer.?tier.orValue("") == "gold"`, bare, false},
		{`payload.items.exists(i, i.sku == "A")`, gold, true},
		{`payload.items.exists(i, i.sku == "A")`, silver, false},
		{`payload.items.exists(i, i.sku == "A")`, bare, false},
		{`payload.items.all(i, i.sku != "C")`, gold, true},
		{`size(payload.items) >= 2`, gold, true},
		{`payload.total > 100`, gold, true},    // a JSON integer
		{`payload.total > 100`, silver, false}, // a JSON float
		{`payload.total > 100`, bare, true},    // a JSON float
		{`payload.total > 100.0`, gold, true},
		{`payload.total == 150`, gold, true},
		{`payload.total >= 99.5 && payload.total < 100`, silver, true},
		{`payload.total * 1.2 > 179.0`, gold, true},
		{`int(payload.total) % 2 == 0`, gold, true},
		{`event_type == "order.created" && payload.total > 100`, gold, true},
		{`event_type == "order.paid" || payload.total > 100`, silver, false},
	} {
		f := mustCompile(t, tc.expr)
		got, err := f.Match(NewInput(orderEvent(tc.payload)))
		if err != nil || got != tc.want {
			t.Errorf("%s on %s = %v, %v; want %v", tc.expr, tc.payload, got, err, tc.want)
		}
	}
}

func TestMatchNumbersOfEveryJSONSpelling(t *testing.T) {
	gt := mustCompile(t, "payload.n > 100")
	eq := mustCompile(t, "payload.n == 100")
	for _, tc := range []struct {
		n      string
		gt, eq bool
	}{
		{"100", false, true}, {"100.0", false, true}, {"1e2", false, true}, {"1E+2", false, true},
		{"101", true, false}, {"100.5", true, false}, {"1.005e2", true, false},
		{"-0", false, false}, {"1e308", true, false}, {"-1e308", false, false}, {"5e-324", false, false},
	} {
		in := NewInput(orderEvent(`{"n": ` + tc.n + `}`))
		if got, err := gt.Match(in); err != nil || got != tc.gt {
			t.Errorf("payload.n > 100 with n = %s: %v, %v; want %v", tc.n, got, err, tc.gt)
		}
		if got, err := eq.Match(in); err != nil || got != tc.eq {
			t.Errorf("payload.n == 100 with n = %s: %v, %v; want %v", tc.n, got, err, tc.eq)
		}
	}
}

func TestMatchErrorsMeanNoMatch(t *testing.T) {
	for _, tc := range []struct {
		expr, payload string
		msg           string // the whole message
	}{
		{`payload.customer.tier == "gold"`, `{"total": 1}`, "filter: 1:17: no such key: customer"},
		{`headers["region"] == "eu"`, `{}`, "filter: 1:8: no such key: region"},
		{`payload.total > 100`, `{"total": "150"}`, "filter: 1:15: no such overload"},
		{`payload.total > 100`, `[150]`, "filter: 1:8: unsupported index type 'string' in list"},
		{`payload.total > 100`, `150`, "filter: 1:8: no such key: total"},
		{`payload.total + 1 > 100`, `{"total": 150}`, "filter: 1:15: no such overload"},
		{`payload.flag`, `{"flag": "yes"}`, "filter: result is string, want bool"},
		{`payload.total > 100`, `{"total": 1e400}`, "filter: 1:8: payload not decodable: a number out of range at byte 16"},
		{`payload.total > 100`, `{"total": 1`, "filter: 1:8: payload not decodable: not valid JSON at byte 11"},
		{`payload.total > 100`, `{"total": 1} {}`, "filter: 1:8: payload not decodable: not valid JSON at byte 14"},
		{`payload.total > 100`, ``, "filter: 1:8: payload not decodable: empty"},
		{`payload.total > 100`, `{"a":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`, "filter: 1:8: payload not decodable: nested deeper than 64 at byte 68"},
	} {
		f := mustCompile(t, tc.expr)
		got, err := f.Match(NewInput(orderEvent(tc.payload)))
		if err == nil || got || err.Error() != tc.msg {
			t.Errorf("%s on %.40s = %v, %v; want false, %q", tc.expr, tc.payload, got, err, tc.msg)
		}
		if strings.Contains(tc.msg, "payload not decodable") != errors.Is(err, ErrPayload) {
			t.Errorf("%s on %.40s: errors.Is(%v, ErrPayload) = %v", tc.expr, tc.payload, err, errors.Is(err, ErrPayload))
		}
	}
	// Where the result does not depend on the error, there is none.
	in := NewInput(orderEvent(`not JSON`))
	for expr, want := range map[string]bool{
		`event_type == "order.paid" && payload.total > 100`:    false,
		`event_type == "order.created" || payload.total > 100`: true,
		`payload.total > 100 || event_type == "order.created"`: true,
	} {
		if got, err := mustCompile(t, expr).Match(in); err != nil || got != want {
			t.Errorf("%s on an undecodable payload = %v, %v; want %v, nil", expr, got, err, want)
		}
	}
}

func TestPayloadOverTheSizeLimitIsAnError(t *testing.T) {
	f := mustCompile(t, `has(payload.big)`)
	atLimit := `{"big":"` + strings.Repeat("x", MaxPayloadBytes-10) + `"}`
	if got, err := f.Match(NewInput(orderEvent(atLimit))); err != nil || !got {
		t.Fatalf("payload of %d bytes: %v, %v; want true, nil", len(atLimit), got, err)
	}
	over := `{"big":"` + strings.Repeat("x", MaxPayloadBytes-9) + `"}`
	_, err := f.Match(NewInput(orderEvent(over)))
	if !errors.Is(err, ErrPayload) || !strings.Contains(err.Error(), "1048577 bytes, over the limit of 1048576") {
		t.Fatalf("payload of %d bytes: %v, want ErrPayload naming the size", len(over), err)
	}
}

func TestDeepNestingIsRefusedBeforeDecoding(t *testing.T) {
	f := mustCompile(t, `has(payload.a)`)
	for _, payload := range []string{
		strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000),
		strings.Repeat(`{"a":`, 10_000) + "1" + strings.Repeat("}", 10_000),
		strings.Repeat("[", 10_000), // and not even valid
	} {
		_, err := f.Match(NewInput(orderEvent(payload)))
		// The depth check, not the JSON decoder, refused it: at the 65th bracket.
		if !errors.Is(err, ErrPayload) || !strings.Contains(err.Error(), "nested deeper than 64 at byte") {
			t.Errorf("%.20s… nested 10,000 deep: %v, want ErrPayload from the depth check", payload, err)
		}
	}
	// Brackets inside strings do not count; at the limit is fine.
	inString := `{"a": "` + strings.Repeat("[", 10_000) + `\"{"}`
	if got, err := f.Match(NewInput(orderEvent(inString))); err != nil || !got {
		t.Errorf("brackets in a string: %v, %v; want true, nil", got, err)
	}
	atLimit := `{"a":` + strings.Repeat("[", MaxPayloadDepth-1) + strings.Repeat("]", MaxPayloadDepth-1) + `}`
	if got, err := f.Match(NewInput(orderEvent(atLimit))); err != nil || !got {
		t.Errorf("payload nested %d deep: %v, %v; want true, nil", MaxPayloadDepth, got, err)
	}
}

func TestCostLimitStopsExpensiveEvaluations(t *testing.T) {
	var items strings.Builder
	items.WriteString(`{"items": [`)
	for i := range 1000 {
		if i > 0 {
			items.WriteString(",")
		}
		items.WriteString(`{"sku": "S`)
		items.WriteString(strings.Repeat("x", i%7))
		items.WriteString(`"}`)
	}
	items.WriteString(`]}`)
	in := NewInput(orderEvent(items.String()))

	// 1,000 × 1,000 visits: far over the limit.
	quadratic := mustCompile(t, `payload.items.exists(a, payload.items.exists(b, a.sku == b.sku + "!"))`)
	got, err := quadratic.Match(in)
	if got || !errors.Is(err, ErrCostLimit) || err.Error() != "filter: cost limit exceeded (limit 10000)" {
		t.Fatalf("nested exists over 1,000 items: %v, %v; want false, ErrCostLimit", got, err)
	}
	// One pass over the same 1,000 items is under it.
	linear := mustCompile(t, `payload.items.exists(i, i.sku == "A")`)
	if got, err := linear.Match(in); err != nil || got {
		t.Fatalf("exists over 1,000 items: %v, %v; want false, nil", got, err)
	}
}

func TestCostLimitStopsARegexBeforeItRuns(t *testing.T) {
	// CEL charges [a-z]{1000} by its 11 characters; it compiles to over
	// 1,000 instructions, and the guard charges those before running it.
	// CEL's own charge for 30,000 characters would be 3,001 × 2.75, under
	// the limit.
	f := mustCompile(t, `payload.note.matches("[a-z]{1000}")`)
	_, err := f.Match(NewInput(orderEvent(`{"note": "` + strings.Repeat("ab", 15_000) + `"}`)))
	if !errors.Is(err, ErrCostLimit) || !strings.HasPrefix(err.Error(), "filter: 1:21: cost limit exceeded: matches on 30000 characters with a pattern of size") {
		t.Fatalf("regex with a large program on 30,000 characters: %v, want the guard's ErrCostLimit", err)
	}
	// The same pattern on a short text runs.
	got, err := f.Match(NewInput(orderEvent(`{"note": "` + strings.Repeat("ab", 100) + `"}`)))
	if err != nil || got {
		t.Fatalf("regex on 200 characters: %v, %v; want false, nil", got, err)
	}
	// matches(s, p) is guarded too.
	_, err = mustCompile(t, `matches(payload.note, "[a-z]{1000}")`).Match(NewInput(orderEvent(`{"note": "` + strings.Repeat("ab", 15_000) + `"}`)))
	if !errors.Is(err, ErrCostLimit) || !strings.Contains(err.Error(), "matches on 30000 characters") {
		t.Fatalf("matches(s, p) with a large program on 30,000 characters: %v, want the guard's ErrCostLimit", err)
	}
}

func TestEvaluationErrorsAreShortAndOneLine(t *testing.T) {
	// int() of a string quotes the string in CEL's message.
	f := mustCompile(t, `int(payload.s) > 1`)
	_, err := f.Match(NewInput(orderEvent(`{"s": "` + strings.Repeat("x", 10_000) + `\nsecond line"}`)))
	if err == nil || len(err.Error()) > 300 || strings.ContainsAny(err.Error(), "\n\r") {
		t.Fatalf("error of %d bytes: %.400q, want one line under 300 bytes", len(err.Error()), err)
	}
}

func TestFilterWithoutPayloadNeverDecodesIt(t *testing.T) {
	in := NewInput(orderEvent(`not JSON at all`))
	for _, expr := range []string{
		`event_type == "order.created"`,
		`event_type == "order.paid" && payload.total > 100`,
		`headers["tenant"] == "acme" || payload.total > 100`,
	} {
		if _, err := mustCompile(t, expr).Match(in); err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
	}
	if in.vars.payload != nil {
		t.Fatalf("the payload was decoded: %v", in.vars.payload)
	}
	if _, err := mustCompile(t, `payload.total > 100`).Match(in); !errors.Is(err, ErrPayload) {
		t.Fatalf("payload.total > 100 on invalid JSON: %v, want ErrPayload", err)
	}
}

func TestInputIsSharedByConcurrentFilters(t *testing.T) {
	filters := []*Filter{
		mustCompile(t, `payload.total > 100`),
		mustCompile(t, `payload.items.exists(i, i.sku == "A")`),
		mustCompile(t, `payload.customer.tier == "gold"`),
		mustCompile(t, `event_type == "order.created"`),
	}
	for range 20 {
		in := NewInput(orderEvent(`{"total": 150, "customer": {"tier": "gold"}, "items": [{"sku": "A"}]}`))
		var wg sync.WaitGroup
		for range 8 {
			for _, f := range filters {
				wg.Go(func() {
					if got, err := f.Match(in); err != nil || !got {
						t.Errorf("%s: %v, %v; want true, nil", f, got, err)
					}
				})
			}
		}
		wg.Wait()
	}
}

func TestNilHeadersAreAnEmptyMap(t *testing.T) {
	ev := orderEvent(`{}`)
	ev.Headers = nil
	in := NewInput(ev)
	if got, err := mustCompile(t, `size(headers) == 0 && !("tenant" in headers)`).Match(in); err != nil || !got {
		t.Fatalf("nil headers: %v, %v; want true, nil", got, err)
	}
}

func TestStringIsTheExpression(t *testing.T) {
	const expr = "event_type == \"order.created\"\n  && payload.total > 100"
	if got := mustCompile(t, expr).String(); got != expr {
		t.Fatalf("String() = %q, want %q", got, expr)
	}
}

func TestPathologicalExpressionsCompileOrAreRefused(t *testing.T) {
	for name, expr := range map[string]string{
		"parentheses":    strings.Repeat("(", 4000),
		"brackets":       strings.Repeat("[", 4000),
		"selects":        "payload" + strings.Repeat(".a", 2000),
		"negations":      strings.Repeat("!", 4000) + "true",
		"minus signs":    strings.Repeat("-", 4000) + "1 > 0",
		"additions":      "1" + strings.Repeat("+1", 2000) + " > 0",
		"conjunctions":   "true" + strings.Repeat("&&true", 680),
		"control bytes":  strings.Repeat("\x19", 4096),
		"garbage":        strings.Repeat("a b ", 1024),
		"long list":      "[" + strings.Repeat("1,", 2000) + "1].size() > 0",
		"long map":       "{" + strings.Repeat("1:1,", 1000) + "}.size() > 0",
		"comprehensions": strings.Repeat("payload.exists(x,", 200) + "true" + strings.Repeat(")", 200),
		"concatenations": strings.Repeat(`"a"+`, 1000) + `"a" == event_type`,
	} {
		err := Check(expr)
		var ce *CompileError
		if err != nil && (!errors.As(err, &ce) || strings.ContainsAny(err.Error(), "\n\r")) {
			t.Errorf("%s: %q, want nil or a one-line *CompileError", name, err)
		}
	}
}
