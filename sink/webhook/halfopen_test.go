package webhook_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/netfault"
	"github.com/postbox-go/postbox/sink/webhook"
)

// After a request times out, the idle connections kept to the endpoint are
// dropped, not reused: a link that went half-open while idle (the peer's
// host gone and back, a load balancer's state lost) would time the next
// requests out one after the other, and a relay takes timeouts in a row
// for an outage, long after the endpoint answers again.
func TestTimeoutDropsIdleConnections(t *testing.T) {
	var (
		n    atomic.Int32
		both = make(chan struct{})
	)
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		// The first two requests wait for each other: two connections,
		// both kept idle once answered.
		switch n.Add(1) {
		case 1:
			<-both
		case 2:
			close(both)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	proxy, err := netfault.NewProxy(strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	s := newSink(t, webhook.Config{URL: "http://" + proxy.Addr(), Timeout: 300 * time.Millisecond})
	var pair sync.WaitGroup
	for range 2 {
		pair.Add(1)
		go func() {
			defer pair.Done()
			if err := s.Publish(context.Background(), newMessage()); err != nil {
				t.Errorf("publish before the fault: %v", err)
			}
		}()
	}
	pair.Wait()
	proxy.HalfOpen() // both idle connections: new ones go through
	if err := s.Publish(context.Background(), newMessage()); err == nil {
		t.Fatal("publish on a half-open connection: delivered, want a timeout")
	}
	if err := s.Publish(context.Background(), newMessage()); err != nil {
		t.Fatalf("publish after a timeout: %v; want it sent on a new connection", err)
	}
}
