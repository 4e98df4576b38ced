package demo

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
)

// The end of a demo does not wait for the relay it crashed: a killed process
// is not waited for, and that relay spends seconds failing to record its
// last outcomes (the demo used to sit there with unchanged progress lines).
func TestStopDoesNotWaitForTheCrashedRelay(t *testing.T) {
	ctx := context.Background()
	b, err := openBackend(ctx, "sqlite:"+filepath.Join(t.TempDir(), "demo.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	for i := range 4 {
		if err := b.outbox.Enqueue(ctx, postbox.Event{AggregateType: "order", AggregateID: string(rune('a' + i)),
			EventType: "order.created", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	delivering := make(chan struct{}, 4)
	slow := sinkFunc(func(ctx context.Context, _ *sink.Message) error {
		delivering <- struct{}{}
		time.Sleep(300 * time.Millisecond)
		return nil
	})
	r := &relayRunner{backend: b, sink: &countingSink{next: slow, c: &counters{}}}
	r.start(ctx)
	<-delivering
	crashed := r.stopped
	r.crashAndRestart(ctx)
	r.stop()
	select {
	case <-crashed:
		t.Fatal("stop waited for the crashed relay to end")
	default:
	}
	<-crashed // before the store closes and its folder is removed
}
