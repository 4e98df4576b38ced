package sink_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/postbox-go/postbox/sink"
)

func TestClassify(t *testing.T) {
	plain := errors.New("connection refused")
	if k, _, _ := sink.Classify(plain); k != sink.Retryable {
		t.Fatalf("plain error: got %v, want retryable", k)
	}
	wrapped := fmt.Errorf("publish: %w", &sink.Error{Kind: sink.Permanent, StatusCode: 410, Err: plain})
	k, _, code := sink.Classify(wrapped)
	if k != sink.Permanent || code != 410 {
		t.Fatalf("wrapped 410: got %v %d", k, code)
	}
	_, after, _ := sink.Classify(&sink.Error{Kind: sink.Retryable, RetryAfter: 3 * time.Second, Err: plain})
	if after != 3*time.Second {
		t.Fatalf("retry-after: got %v", after)
	}
	if !errors.Is(wrapped, plain) {
		t.Fatal("sink.Error must unwrap to its cause")
	}
}
