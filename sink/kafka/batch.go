package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postbox-go/postbox/sink"
)

// arenaPerRecord is the room a batch reserves per record for the bytes of
// its key and header values (an event id, its type, aggregate type and id,
// the attempt and content type, a traceparent): more is appended as
// needed.
const arenaPerRecord = 256

// PublishBatch produces the records of msgs in a row, each with its own
// promise, and then waits once for their acknowledgements (acks=all), at
// most Config.Timeout for the whole batch; errs[i] is what Publish would
// have returned for msgs[i]. The relay's batches (relay.Config.PublishBatch,
// the kafka URL kind's default) so cost no goroutine, timer and channel
// per record, and their records are laid out in one allocation.
//
// Records are produced in the order of msgs: those of one aggregate (one
// key, one partition) are written in that order. A message Kafka would
// refuse (see Publish) fails alone, as sink.Permanent, and is never
// produced; the cluster's answer for a topic that does not exist is asked
// for once per topic and batch. A message not acknowledged when ctx ends
// fails with ctx's cause; one not acknowledged within Config.Timeout as
// Publish's does, sink.Unavailable when no broker answers.
func (s *Sink) PublishBatch(ctx context.Context, msgs []*sink.Message, errs []error) {
	if ctx.Err() != nil {
		for i, m := range msgs {
			errs[i] = fmt.Errorf("kafka: event %s: %w", m.ID, context.Cause(ctx))
		}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	headerCount := 0
	for _, m := range msgs {
		headerCount += len(m.Headers) + recordHeaders
	}
	recs := make([]kgo.Record, len(msgs))
	headers := make([]kgo.RecordHeader, 0, headerCount)
	arena := make([]byte, 0, arenaPerRecord*len(msgs))
	a := &acks{raw: make([]error, len(msgs)), acked: make([]bool, len(msgs)), all: make(chan struct{})}
	a.left.Store(int64(len(msgs)) + 1) // + 1 until every record is produced
	for i, m := range msgs {
		rec := &recs[i]
		n := len(m.Headers) + recordHeaders
		arena = s.layout(rec, m, headers[len(headers):len(headers):len(headers)+n], arena)
		headers = headers[:len(headers)+len(rec.Headers)]
		if err := s.refusal(m, rec); err != nil {
			errs[i] = &sink.Error{Kind: sink.Permanent, Err: err}
			a.done()
			continue
		}
		s.client.Produce(ctx, rec, func(_ *kgo.Record, err error) { a.ack(i, err) })
	}
	a.done()

	select {
	case <-a.all:
	case <-ctx.Done():
	}
	// The outcomes as they stand: a promise that comes later is dropped.
	// The failures are classified after, the lock let go, since a promise
	// must not wait (franz-go calls them one after the other).
	a.mu.Lock()
	a.over = true
	a.mu.Unlock()
	var topics map[string]topicState
	for i, m := range msgs {
		var err error
		switch {
		case errs[i] != nil: // refused
			continue
		case !a.acked[i], ctx.Err() != nil && isContextError(a.raw[i]):
			// Not acknowledged, or failed by franz-go for the end of
			// ctx (its error then holds no cause): ctx's cause.
			err = context.Cause(ctx)
		case a.raw[i] != nil:
			err = a.raw[i]
		default:
			continue
		}
		if topics == nil {
			topics = map[string]topicState{}
		}
		topic := recs[i].Topic
		errs[i] = s.classify(topic, fmt.Errorf("kafka: event %s to topic %q: %w", m.ID, topic, err), topics)
	}
}

// isContextError reports an error of a context's end.
func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// acks collects the outcomes of a batch's records, which franz-go's
// promises bring.
type acks struct {
	// left counts the records produced and not yet acknowledged, plus
	// one until the last was produced; all is closed when it reaches 0.
	left atomic.Int64
	all  chan struct{}

	mu    sync.Mutex
	raw   []error // by record: the produce's error
	acked []bool  // by record: its promise came
	over  bool    // PublishBatch returned: outcomes that come now are dropped
}

// ack is the promise of record i.
func (a *acks) ack(i int, err error) {
	a.mu.Lock()
	if !a.over {
		a.raw[i], a.acked[i] = err, true
	}
	a.mu.Unlock()
	a.done()
}

// done counts one record, or the end of producing, off.
func (a *acks) done() {
	if a.left.Add(-1) == 0 {
		close(a.all)
	}
}
