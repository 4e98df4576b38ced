package postbox_test

import (
	"testing"
	"time"

	"github.com/postbox-go/postbox"
)

// An AvailableAt the stores cannot hold (outside years 1 to 9999) is
// refused before anything is written; the edges are accepted.
func TestValidateBoundsAvailableAt(t *testing.T) {
	for at, ok := range map[time.Time]bool{
		{}:                                       true,
		time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC): true,
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC): true,
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC):     false,
		time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC):       false,
		time.Date(-4713, 1, 1, 0, 0, 0, 0, time.UTC):     false,
		time.Unix(1<<62, 0):                              false,
	} {
		e := postbox.Event{EventType: "order.created", Payload: []byte(`{}`), AvailableAt: at}
		if err := e.Validate(); (err == nil) != ok {
			t.Errorf("AvailableAt %v: Validate() = %v, want accepted %v", at, err, ok)
		}
	}
}
