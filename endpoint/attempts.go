package endpoint

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint/guard"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// attemptLog is the innermost sink middleware of an endpoint, around its
// webhook sink: it writes every attempt to the attempts log (status code,
// duration, the start of the response, the error) and tells the
// endpoint's health how it went. A connection the SSRF guard refused is
// returned as a permanent error that says so, whole.
type attemptLog struct {
	next     sink.Sink
	endpoint uuid.UUID
	log      *batcher[store.Attempt]
	health   *health
}

func (a *attemptLog) Publish(ctx context.Context, m *sink.Message) error {
	var ans answer
	start := time.Now()
	err := a.next.Publish(withAnswer(ctx, &ans), m)
	end := time.Now()
	err = guardRefusal(err)
	status, body := ans.read()
	if status == 0 && err != nil {
		_, _, status = sink.Classify(err)
	}
	attempt := store.Attempt{EndpointID: a.endpoint, EventID: m.ID, EventType: m.EventType, Attempt: m.Attempt,
		StatusCode: status, Duration: end.Sub(start), Response: body, At: end}
	if err != nil {
		attempt.Error = err.Error()
	}
	a.log.add(attempt)
	if err == nil || ctx.Err() == nil {
		// An attempt cut short (shutdown, lease lost) says nothing of the
		// endpoint.
		a.health.record(err, end)
	}
	return err
}

func (a *attemptLog) String() string { return a.next.String() }

func (a *attemptLog) Destination() sink.Destination { return a.next.Destination() }

// guardRefusal rewords err when the SSRF guard refused the connection: a
// permanent failure (no retry helps until someone allows the address) that
// says so first, with the guard's whole reason and what allows it.
func guardRefusal(err error) error {
	var blocked *guard.BlockedError
	if err == nil || !errors.As(err, &blocked) {
		return err
	}
	why := "the SSRF guard refused to connect to the endpoint: " + blocked.Error()
	if blocked.Private {
		why += " (or let this endpoint alone reach private addresses: its allow-private setting)"
	}
	return &sink.Error{Kind: sink.Permanent, Err: errors.New(why)}
}

// answer is what the capturing transport saw of one request's response:
// its status and the start of its body.
type answer struct {
	mu     sync.Mutex
	status int
	body   []byte
}

type answerKey struct{}

// withAnswer returns ctx carrying a for the capturing transport.
func withAnswer(ctx context.Context, a *answer) context.Context {
	return context.WithValue(ctx, answerKey{}, a)
}

// capturingTransport records, for requests whose context carries an
// *answer, the response status and the first store.AttemptResponseMax
// bytes of the body the sink reads.
type capturingTransport struct{ base http.RoundTripper }

func (t capturingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	a, ok := req.Context().Value(answerKey{}).(*answer)
	if err != nil || !ok {
		return resp, err
	}
	a.mu.Lock()
	a.status = resp.StatusCode
	a.mu.Unlock()
	resp.Body = &capturingBody{ReadCloser: resp.Body, a: a}
	return resp, nil
}

type capturingBody struct {
	io.ReadCloser
	a *answer
}

func (b *capturingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.a.mu.Lock()
	if room := store.AttemptResponseMax - len(b.a.body); room > 0 {
		b.a.body = append(b.a.body, p[:min(n, room)]...)
	}
	b.a.mu.Unlock()
	return n, err
}

func (a *answer) read() (int, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status, string(a.body)
}

// withCapture returns a copy of client whose transport captures answers.
func withCapture(client *http.Client) *http.Client {
	c := &http.Client{}
	if client != nil {
		*c = *client
	}
	base := c.Transport
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64 // keep a connection per delivery in flight alive
		base = t
	}
	c.Transport = capturingTransport{base}
	return c
}

// batcher writes items in batches, in a goroutine of its own (run): every
// flush interval, or once batch items wait. The attempts log and the
// settling of deliveries go through one each.
type batcher[T any] struct {
	batch int
	every time.Duration
	in    chan T
	// write writes one batch; its error is logged by the caller's write.
	write func(ctx context.Context, items []T)
}

func newBatcher[T any](batch int, every time.Duration, write func(context.Context, []T)) *batcher[T] {
	return &batcher[T]{batch: batch, every: every, in: make(chan T, batch), write: write}
}

func (b *batcher[T]) add(item T) { b.in <- item }

// run writes the items it is given until in is closed, then writes the
// last ones.
func (b *batcher[T]) run() {
	var pending []T
	tick := time.NewTicker(b.every)
	defer tick.Stop()
	flush := func() {
		if len(pending) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b.write(ctx, pending)
		pending = pending[:0]
	}
	for {
		select {
		case item, ok := <-b.in:
			if !ok {
				flush()
				return
			}
			if pending = append(pending, item); len(pending) >= b.batch {
				flush()
			}
		case <-tick.C:
			flush()
		}
	}
}
