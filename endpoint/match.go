package endpoint

import (
	"fmt"
	"path"
	"strings"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
)

// ValidateTypes checks an endpoint's type filter: globs with path.Match
// syntax ("order.*", "payment.succeeded").
func ValidateTypes(types []string) error {
	for _, t := range types {
		if _, err := path.Match(t, ""); err != nil {
			return fmt.Errorf("endpoint: type filter %q: %w", t, err)
		}
	}
	return nil
}

// Matches reports whether an endpoint with the type filter types wants
// events of eventType: an empty filter wants them all, but for postbox's
// own (IsOperatorEvent: "postbox.endpoint.disabled", ...), which only a
// glob that begins with OperatorEventPrefix itself takes
// ("postbox.endpoint.*", "postbox.*"; not "*", nor "post*"): an endpoint
// gets them only when it asks for them by name, so that a failing
// endpoint is never sent news of failures by accident.
func Matches(types []string, eventType string) bool {
	operator := IsOperatorEvent(eventType)
	if len(types) == 0 {
		return !operator
	}
	for _, t := range types {
		if operator && !strings.HasPrefix(t, OperatorEventPrefix) {
			continue
		}
		if ok, _ := path.Match(t, eventType); ok {
			return true
		}
	}
	return false
}

// Wants reports whether the endpoint id, with the type filter types,
// wants ev by its type and subject: Matches(types, ev.EventType), and ev
// is no operator event about that endpoint itself (an endpoint is never
// sent news of its own failures, nor of its own dead letters). It is the
// rule the fan-out routes by and a replay to one endpoint chooses by
// (package replay); the endpoint's content filter, if any, is checked
// after it.
func Wants(id uuid.UUID, types []string, ev postbox.Event) bool {
	return Matches(types, ev.EventType) && (id == uuid.Nil || operatorSubject(ev) != id)
}
