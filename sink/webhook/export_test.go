package webhook

import "time"

// SetNow replaces the clock that timestamps signatures and reads Retry-After
// dates.
func SetNow(s *Sink, now func() time.Time) { s.now = now }
