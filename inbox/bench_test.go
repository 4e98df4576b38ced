package inbox_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/signature"
)

// BenchmarkHandler sends signed webhook deliveries of new events over
// loopback HTTP through the handler into a PostgreSQL inbox, one at a time
// and from GOMAXPROCS senders at once. req/s is the throughput.
func BenchmarkHandler(b *testing.B) {
	b.Run("serial", func(b *testing.B) { benchmarkHandler(b, false) })
	b.Run("parallel", func(b *testing.B) { benchmarkHandler(b, true) })
}

func benchmarkHandler(b *testing.B, parallel bool) {
	f := newFixture(b, inbox.HandlerConfig{Logger: testlog.Discard()})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	send := func() {
		id := postbox.NewID()
		body := payload(id)
		req, err := http.NewRequest(http.MethodPost, f.srv.URL, bytes.NewReader(body))
		if err != nil {
			b.Error(err)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(inbox.HeaderEventType, "order.created")
		if err := f.signer.Sign(req.Header, id.String(), time.Now(), body); err != nil {
			b.Error(err)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Errorf("answered %d", resp.StatusCode)
		}
	}
	b.ReportAllocs()
	start := time.Now()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				send()
			}
		})
	} else {
		for b.Loop() {
			send()
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// BenchmarkHandlerOverhead is the handler's own cost per delivery, without
// a network or a database: a signed request served into a recorder, with a
// Process that reports the event processed at once. It is what the handler
// adds to the inbox's transaction.
func BenchmarkHandlerOverhead(b *testing.B) {
	signer, err := signature.NewSigner(signature.Standard, standardSecret)
	if err != nil {
		b.Fatal(err)
	}
	h, err := inbox.NewHandler(inbox.HandlerConfig{
		Secrets: []string{standardSecret}, Logger: testlog.Discard(),
		Process: func(context.Context, *inbox.Event) (inbox.Outcome, error) { return inbox.Processed, nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	id := postbox.NewID()
	body := payload(id)
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set(inbox.HeaderEventType, "order.created")
	header.Set(inbox.HeaderAggregateType, "order")
	header.Set(inbox.HeaderAggregateID, "order-42")
	if err := signer.Sign(header, id.String(), time.Now(), body); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header = header.Clone()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("answered %d: %s", w.Code, w.Body)
		}
	}
}
