package filter

import (
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
