package filter

import (
	"github.com/postbox-go/postbox/internal/jsondepth"

	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

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
	if at, deep := jsondepth.Exceeds(raw, maxDepth); deep {
		return &payloadError{fmt.Sprintf("nested deeper than %d at byte %d", maxDepth, at)}
	}
	return nil
}

// payloadError says why a payload cannot be decoded; it never quotes the
// payload. It matches ErrPayload.
type payloadError struct{ reason string }

func (e *payloadError) Error() string { return ErrPayload.Error() + ": " + e.reason }

// Is reports whether target is ErrPayload.
func (e *payloadError) Is(target error) bool { return target == ErrPayload }
