// Package httpfault injects the failures of a webhook consumer in front of
// its http.Handler: an error answer, a handler that fails after the inbox
// insert, a connection dropped before or after the event was applied, an
// answer held past the sender's timeout, a consumer that never answers.
// The demo picks them at random; the chaos suite on a schedule.
package httpfault

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"time"
)

// Fault is what happens to one request.
type Fault int

const (
	// None: the request reaches the handler unchanged.
	None Fault = iota
	// ServerError: 503 with a body, before anything is processed.
	ServerError
	// HandlerFailure: the request reaches the handler, whose business
	// logic must fail after the inbox insert (it asks HandlerFails), so
	// that the inbox transaction rolls back and the sender gets a 500.
	HandlerFailure
	// DropBefore: the connection is closed before anything is processed.
	DropBefore
	// DropAfter: the event is applied, then the connection is closed
	// without an answer: the sender retries an event already applied.
	DropAfter
	// SlowAfter: the event is applied, and the answer is held for the
	// middleware's hold, past the sender's timeout.
	SlowAfter
	// Unresponsive: nothing is processed and no answer is sent until the
	// sender gives up (the request's context ends).
	Unresponsive
)

// ErrInjected is the error of a business handler that HandlerFails told to
// fail.
var ErrInjected = errors.New("injected handler failure")

type faultKey struct{}

// HandlerFails reports whether the business handler running for the
// request of ctx must fail (with ErrInjected) after the inbox insert.
func HandlerFails(ctx context.Context) bool {
	f, _ := ctx.Value(faultKey{}).(Fault)
	return f == HandlerFailure
}

// Middleware asks pick for the fault of each request and injects it in
// front of next; hold is how long SlowAfter holds an answer.
func Middleware(pick func() Fault, hold time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch f := pick(); f {
		case ServerError:
			http.Error(w, "injected failure", http.StatusServiceUnavailable)
		case DropBefore:
			dropConnection(w)
		case DropAfter:
			next.ServeHTTP(httptest.NewRecorder(), r)
			dropConnection(w)
		case SlowAfter:
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			select {
			case <-time.After(hold):
			case <-r.Context().Done():
				return
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		case Unresponsive:
			// Reading the body lets the server notice the sender
			// leaving, which ends the request's context.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		default:
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), faultKey{}, f)))
		}
	})
}

func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}
