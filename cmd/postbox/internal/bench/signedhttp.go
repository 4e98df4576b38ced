package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink/webhook"
)

// signedHTTP is the raw signed-HTTP limit of the webhook scenario: a bare
// net/http client, no database, posting n requests to url from concurrency
// goroutines, each signed as the webhook sink signs (Standard Webhooks,
// secret), with the headers and the body the sink would send for the
// events of a backlog (see pgFill). Every request must be answered 200. It
// returns the rate from the first request to the last answer.
func signedHTTP(ctx context.Context, url, secret string, n, concurrency int) (float64, error) {
	signer, err := signature.NewSigner(signature.Standard, secret)
	if err != nil {
		return 0, err
	}
	// As the webhook sink's own client: keep-alive connections, enough of
	// them idle for every request at once.
	dialer := &net.Dialer{Timeout: webhook.TimeoutDefault, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		DialContext: dialer.DialContext, MaxIdleConns: concurrency, MaxIdleConnsPerHost: concurrency,
		IdleConnTimeout: 90 * time.Second, ResponseHeaderTimeout: webhook.TimeoutDefault,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: webhook.TimeoutDefault}
	events := make([]postbox.Event, n)
	for i := range events {
		events[i] = orderEvent(int64(i + 1))
	}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := postSigned(ctx, client, signer, url, &events[i]); err != nil {
					errOnce.Do(func() { firstErr = err })
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return 0, firstErr
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return rate(n, elapsed), nil
}

// postSigned posts ev as the webhook sink would on a first attempt: its
// payload, the sink's headers, signed now.
func postSigned(ctx context.Context, client *http.Client, signer *signature.Signer, url string, ev *postbox.Event) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(ev.Payload))
	if err != nil {
		return err
	}
	h := make(http.Header, 9)
	req.Header = h
	h.Set(postbox.HeaderContentType, postbox.ContentTypeJSON)
	h.Set("User-Agent", webhook.UserAgentDefault)
	h.Set(postbox.HeaderEventType, ev.EventType)
	h.Set(postbox.HeaderAggregateType, ev.AggregateType)
	h.Set(postbox.HeaderAggregateID, ev.AggregateID)
	h.Set(postbox.HeaderAttempt, strconv.Itoa(1))
	if err := signer.Sign(h, ev.ID.String(), time.Now(), ev.Payload); err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("signed HTTP: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("signed HTTP: answered %s", resp.Status)
	}
	return nil
}
