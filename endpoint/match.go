package endpoint

import (
	"fmt"
	"path"
	"strings"
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
