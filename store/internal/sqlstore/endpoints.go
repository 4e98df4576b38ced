package sqlstore

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// NewEndpoint is e as EndpointCreate writes it: with an id (a new UUIDv7)
// and a state (enabled) when they are not given.
func NewEndpoint(e store.Endpoint) store.Endpoint {
	if e.ID == uuid.Nil {
		e.ID = uuid.Must(uuid.NewV7())
	}
	if e.State == "" {
		e.State = store.EndpointEnabled
	}
	return e
}

// CheckEndpoint checks e before EndpointCreate writes it: its texts
// (CheckSettings, and those of its sealed secrets), and that a sealed
// endpoint has no clear secret beside its sealed ones. The errors name
// what is wrong, never a value.
func CheckEndpoint(e store.Endpoint) error {
	if len(e.Sealed.Data) > 0 && e.Secret != "" {
		return errors.New("an endpoint with sealed secrets has no clear secret")
	}
	if err := CheckSettings(e); err != nil {
		return err
	}
	return checkSealedText(e.Sealed)
}

// CheckSettings checks the texts of e's settings that the stores keep as
// given, before EndpointCreate or EndpointUpdate writes them: Filter,
// Envelope and Signature must be valid UTF-8 without NUL (which
// PostgreSQL's text cannot hold: both stores refuse them alike).
func CheckSettings(e store.Endpoint) error {
	return checkText("Filter", e.Filter, "Envelope", e.Envelope, "Signature", e.Signature)
}

// Unmatchable reports whether updatedAt, the UpdatedAt given to
// EndpointUpdate (not zero), cannot be the updated_at of a row as either
// store returns it: a time with a fraction of a microsecond (both stores
// keep microseconds). Such an update changes nothing
// (store.ErrEndpointChanged), where the drivers' own truncation of the
// argument would compare it as if it had been read.
func Unmatchable(updatedAt time.Time) bool {
	return updatedAt.Nanosecond()%int(time.Microsecond) != 0
}

// CheckSealed checks sealed before EndpointSeal writes it: Data is not
// empty (sealing nothing would drop the endpoint's secrets), and its texts
// are valid UTF-8 without NUL.
func CheckSealed(sealed store.SealedSecrets) error {
	if len(sealed.Data) == 0 {
		return errors.New("no sealed data: sealing nothing would drop the endpoint's secrets")
	}
	return checkSealedText(sealed)
}

func checkSealedText(sealed store.SealedSecrets) error {
	return checkText("Sealed.Key", sealed.Key, "Sealed.Fingerprint", sealed.Fingerprint, "Sealed.Auth", sealed.Auth)
}

// checkText checks pairs of a field's name and its value.
func checkText(pairs ...string) error {
	for i := 0; i < len(pairs); i += 2 {
		if v := pairs[i+1]; !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("endpoint's %s is not valid UTF-8 text without NUL", pairs[i])
		}
	}
	return nil
}

// SealedArg is sealed data as the stores' sealed column holds it: the
// bytes, or SQL NULL (nil) when there are none (not sealed).
func SealedArg(data []byte) any {
	if len(data) == 0 {
		return nil
	}
	return data
}

// SealedRead is the sealed column as read: nil when it held none.
func SealedRead(data []byte) []byte {
	if len(data) == 0 {
		return nil
	}
	return data
}

// AttemptText is an attempt's response and error as stored: cleaned, and
// cut to store.AttemptResponseMax and ErrorTextMax bytes.
func AttemptText(a store.Attempt) (response, errText string) {
	return store.ErrorText(a.Response, store.AttemptResponseMax), store.ErrorText(a.Error, ErrorTextMax)
}

// SummaryTimes are the times an AttemptSummary query takes for since (see
// store.Endpoints.AttemptSummary): From, the first time counted (since,
// the start of year 10000 for a since after year 9999), or Unbounded for
// the zero since and one before year 1: every attempt counts. Min and End
// bound the times Last is taken from (years 1 to 9999: what every client
// reads), End excluded.
type SummaryTimes struct {
	From      time.Time
	Unbounded bool
	Min, End  time.Time
}

// SummarySince returns the SummaryTimes of since.
func SummarySince(since time.Time) SummaryTimes {
	st := SummaryTimes{From: since, Min: timeMin, End: timeEnd}
	switch {
	case since.IsZero() || since.Before(timeMin):
		st.From, st.Unbounded = time.Time{}, true
	case !since.Before(timeEnd):
		st.From = timeEnd
	}
	return st
}

// ErrorTextMax is the longest error text of a delivery or an attempt.
const ErrorTextMax = 2000

// LaneName names an endpoint's lane in logs and errors: its name and id
// (never its URL, which may hold credentials, nor its secrets).
func LaneName(e store.Endpoint) string {
	return fmt.Sprintf("endpoint %q (%s)", e.Name, e.ID)
}

// LaneCannotListen is the error of a lane's Listen: package endpoint wakes
// its lanes itself. storeName prefixes it.
func LaneCannotListen(storeName string, e store.Endpoint) error {
	return fmt.Errorf("%s: %s: lanes are woken by package endpoint: %w", storeName, LaneName(e), store.ErrCannotListen)
}

// HeldInOrder returns those of ids that are in held, in the order of ids:
// what a lane's ExtendLease returns from the ids its statement renewed.
func HeldInOrder(ids, held []uuid.UUID) []uuid.UUID {
	in := make(map[uuid.UUID]bool, len(held))
	for _, id := range held {
		in[id] = true
	}
	out := make([]uuid.UUID, 0, len(held))
	for _, id := range ids {
		if in[id] {
			out = append(out, id)
		}
	}
	return out
}

// LaneWindow is the number of due deliveries, per delivery asked for,
// that an ordered claim of a lane checks for heads before it walks the
// endpoint's aggregates (as the PostgreSQL outbox's ordered claim does).
const LaneWindow = 4

// CheckRoutes checks the Tried of each route as DeliveryInsert takes it:
// one entry per endpoint, each of a status store.Tried names, and a
// pending one's RetryAt, when not zero, from year 1 to 9999 (the times a
// row may hold: see TimeProblem). A batch with an entry that breaks them is
// refused whole, so that nothing of it is written. It reports whether any
// entry is not the zero Tried: a batch without one is written as plain
// routes are.
func CheckRoutes(routes []store.Route) (tried bool, err error) {
	for i, r := range routes {
		if r.Tried == nil {
			continue
		}
		if len(r.Tried) != len(r.Endpoints) {
			return false, fmt.Errorf("route %d (event %s): %d Tried for %d endpoints, want one per endpoint",
				i, r.Event.ID, len(r.Tried), len(r.Endpoints))
		}
		for j, t := range r.Tried {
			if t.Attempts == 0 && t.Status == "" && t.RetryAt.IsZero() && t.LastError == "" {
				continue // not tried
			}
			tried = true
			switch t.Status {
			case "", store.StatusPending, store.StatusFailed, store.StatusDropped, store.StatusDone:
			default:
				return false, fmt.Errorf("route %d (event %s), endpoint %s: Tried status %q is not pending, failed, dropped or done",
					i, r.Event.ID, r.Endpoints[j], t.Status)
			}
			if TriedStatus(t) == store.StatusPending && !t.RetryAt.IsZero() {
				if problem := TimeProblem(t.RetryAt); problem != "" {
					return false, fmt.Errorf("route %d (event %s), endpoint %s: Tried RetryAt: %s",
						i, r.Event.ID, r.Endpoints[j], problem)
				}
			}
		}
	}
	return tried, nil
}

// TriedStatus is the status of the delivery t writes: pending when t's is
// empty.
func TriedStatus(t store.Tried) string {
	if t.Status == "" {
		return store.StatusPending
	}
	return t.Status
}

// TriedAttempts is t.Attempts as a delivery's attempts column holds it:
// from 0 to RetriesMax, the bound at which the lanes' settles saturate.
func TriedAttempts(t store.Tried) int32 {
	return int32(min(max(t.Attempts, 0), RetriesMax))
}

// TriedError is the last_error of the delivery t writes, cleaned and cut
// as a settle's (ErrorTextMax); "" (written null) for a delivered one, whose
// error a settle clears.
func TriedError(t store.Tried) string {
	if TriedStatus(t) == store.StatusDone {
		return ""
	}
	return store.ErrorText(t.LastError, ErrorTextMax)
}
