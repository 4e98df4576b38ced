package endpoint

import (
	"fmt"
	"path"
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
// events of eventType: an empty filter wants them all.
func Matches(types []string, eventType string) bool {
	if len(types) == 0 {
		return true
	}
	for _, t := range types {
		if ok, _ := path.Match(t, eventType); ok {
			return true
		}
	}
	return false
}
