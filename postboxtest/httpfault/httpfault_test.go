package httpfault_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/httpfault"
)

// Each fault, as the sender sees it (an answer, or an error) and as the
// handler behind it does (whether it ran, and whether it must fail).
func TestEachFault(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fault     httpfault.Fault
		status    int // 0: the sender gets an error (no answer)
		ran, fail bool
	}{
		{"none", httpfault.None, http.StatusOK, true, false},
		{"server error", httpfault.ServerError, http.StatusServiceUnavailable, false, false},
		{"handler failure", httpfault.HandlerFailure, http.StatusInternalServerError, true, true},
		{"drop before", httpfault.DropBefore, 0, false, false},
		{"drop after", httpfault.DropAfter, 0, true, false},
		{"slow after", httpfault.SlowAfter, 0, true, false},
		{"unresponsive", httpfault.Unresponsive, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran, failed atomic.Bool
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ran.Store(true)
				if httpfault.HandlerFails(r.Context()) {
					failed.Store(true)
					http.Error(w, httpfault.ErrInjected.Error(), http.StatusInternalServerError)
				}
			})
			srv := httptest.NewServer(httpfault.Middleware(func() httpfault.Fault { return tc.fault }, 2*time.Second, next))
			defer srv.Close()
			client := &http.Client{Timeout: 500 * time.Millisecond}
			resp, err := client.Post(srv.URL, "application/json", strings.NewReader("{}"))
			status := 0
			if err == nil {
				status = resp.StatusCode
				resp.Body.Close()
			}
			if status != tc.status || ran.Load() != tc.ran || failed.Load() != tc.fail {
				t.Fatalf("status %d (error %v), handler ran %v, failed %v; want %d, %v, %v",
					status, err, ran.Load(), failed.Load(), tc.status, tc.ran, tc.fail)
			}
		})
	}
}
