package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"

	"github.com/postbox-go/postbox"
)

const (
	// MaxPayloadBytes is the largest payload a filter decodes: for a larger
	// one, `payload` is an error (ErrPayload).
	MaxPayloadBytes = 1 << 20

	// MaxPayloadDepth is the deepest nesting of arrays and objects a filter
	// decodes: for a payload nested deeper, `payload` is an error
	// (ErrPayload). The top-level object or array is depth 1.
	MaxPayloadDepth = 64
)

// Input is one event as the filters see it. Build it once per event and
// hand it to the filter of every endpoint: its payload is decoded at most
// once, when an evaluation first reaches `payload`. It is safe for
// concurrent use. It reads the event's Payload and Headers without copying
// them: they must not change while the Input is in use.
type Input struct {
	vars activation
}

// NewInput returns the Input of ev.
func NewInput(ev postbox.Event) *Input {
	headers := ev.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	return &Input{vars: activation{
		eventType:     types.String(ev.EventType),
		aggregateType: types.String(ev.AggregateType),
		aggregateID:   types.String(ev.AggregateID),
		id:            types.String(ev.ID.String()),
		headers:       types.NewStringStringMap(types.DefaultTypeAdapter, headers),
		rawPayload:    ev.Payload,
	}}
}

// activation resolves the filter variables for CEL's interpreter.
type activation struct {
	eventType, aggregateType, aggregateID, id ref.Val
	headers                                   ref.Val

	rawPayload []byte
	decodeOnce sync.Once
	payload    ref.Val // the decoded payload, or a *types.Err of a *payloadError
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "event_type":
		return a.eventType, true
	case "aggregate_type":
		return a.aggregateType, true
	case "aggregate_id":
		return a.aggregateID, true
	case "id":
		return a.id, true
	case "headers":
		return a.headers, true
	case "payload":
		a.decodeOnce.Do(a.decode)
		return a.payload, true
	}
	return nil, false
}

// Parent implements interpreter.Activation: there is none.
func (a *activation) Parent() interpreter.Activation { return nil }

// decode sets payload to rawPayload decoded, or to the error that says why
// it cannot be.
func (a *activation) decode() {
	v, err := decodePayload(a.rawPayload)
	if err != nil {
		a.payload = types.WrapErr(err)
		return
	}
	a.payload = types.DefaultTypeAdapter.NativeToValue(v)
}

// payloadError says why a payload cannot be decoded; it never quotes the
// payload. It matches ErrPayload.
type payloadError struct{ reason string }

func (e *payloadError) Error() string { return ErrPayload.Error() + ": " + e.reason }

// Is reports whether target is ErrPayload.
func (e *payloadError) Is(target error) bool { return target == ErrPayload }

// decodePayload decodes a JSON payload within MaxPayloadBytes and
// MaxPayloadDepth, every number a float64.
func decodePayload(raw []byte) (any, error) {
	if len(raw) > MaxPayloadBytes {
		return nil, &payloadError{fmt.Sprintf("%d bytes, over the limit of %d", len(raw), MaxPayloadBytes)}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, &payloadError{"empty"}
	}
	if err := checkDepth(raw, MaxPayloadDepth); err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		var syntaxErr *json.SyntaxError
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syntaxErr):
			return nil, &payloadError{fmt.Sprintf("not valid JSON at byte %d", syntaxErr.Offset)}
		case errors.As(err, &typeErr):
			return nil, &payloadError{fmt.Sprintf("a number out of range at byte %d", typeErr.Offset)}
		default:
			return nil, &payloadError{"not valid JSON"}
		}
	}
	return v, nil
}

// checkDepth reports a payloadError if raw nests arrays and objects deeper
// than maxDepth. It reads brackets outside strings only and leaves the
// validity of the JSON to the decoder.
func checkDepth(raw []byte, maxDepth int) error {
	depth := 0
	inString, escaped := false, false
	for i, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > maxDepth {
				return &payloadError{fmt.Sprintf("nested deeper than %d at byte %d", maxDepth, i)}
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}
