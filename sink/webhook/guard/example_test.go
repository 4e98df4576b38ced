package guard_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/sink/webhook/guard"
)

// A client through the guard cannot reach the cloud metadata service; the
// refusal names the address and the rule, not the URL.
func Example() {
	g, err := guard.New(guard.Config{})
	if err != nil {
		panic(err)
	}
	_, err = g.Client(10 * time.Second).Get("http://169.254.169.254/latest/meta-data/iam/security-credentials/")
	var refused *guard.BlockedError
	if errors.As(err, &refused) {
		fmt.Println(refused)
	}
	// Output:
	// 169.254.169.254 is link-local (cloud metadata): refused; allow it with --allow-private-endpoints or an allowlist
}

// An allowlist opens one internal network and nothing else.
func ExampleConfig_allow() {
	g, err := guard.New(guard.Config{Allow: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}})
	if err != nil {
		panic(err)
	}
	fmt.Println(g.Check(netip.MustParseAddr("10.20.1.5")))
	fmt.Println(g.Check(netip.MustParseAddr("10.21.0.1")))
	fmt.Println(g.Check(netip.MustParseAddr("203.0.114.7")))
	// Output:
	// <nil>
	// 10.21.0.1 is private (RFC 1918): refused; allow it with --allow-private-endpoints or an allowlist
	// <nil>
}

// The webhook sink delivers through the guard when given its client; a
// refused delivery's error matches guard.ErrBlocked through the sink's.
func ExampleGuard_Client() {
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("internal service reached")
	}))
	defer internal.Close()

	g, err := guard.New(guard.Config{})
	if err != nil {
		panic(err)
	}
	s, err := webhook.New(webhook.Config{
		URL:     internal.URL + "/admin",
		Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		Client:  g.Client(webhook.TimeoutDefault),
	})
	if err != nil {
		panic(err)
	}
	err = s.Publish(context.Background(), &sink.Message{Event: postbox.Event{ID: uuid.New(), EventType: "order.created", Payload: []byte(`{}`)}, Attempt: 1})
	fmt.Println(errors.Is(err, guard.ErrBlocked))
	// Output:
	// true
}
