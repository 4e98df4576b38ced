package endpoint

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook/guard"
	"github.com/postbox-go/postbox/store"
)

// attemptLog is the innermost sink middleware of an endpoint, around its
// own sink (OpenSink): it writes every attempt to the attempts log (a
// webhook's status code and the start of its response, 0 and empty for a
// broker; the duration, the error) and tells the
// endpoint's health how it went, and its pace how long it took. A
// connection the SSRF guard refused is returned as a permanent error that
// says so, whole.
type attemptLog struct {
	next     sink.Sink
	endpoint uuid.UUID
	log      *batcher[store.Attempt]
	health   *health
	pace     *directPace
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
		a.pace.record(attempt.Duration)
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

// withCapture returns a copy of client for one endpoint, whose transport
// captures answers, and that transport's connection pool (nil when the
// client's transport is not an *http.Transport, and is shared as it is).
// An *http.Transport (http.DefaultTransport when the client has none) is
// cloned, so that each endpoint has a pool of its own, and made to keep an
// idle connection for each of the endpoint's deliveries in flight
// (concurrency): net/http keeps 2 per host by default, and a lane that
// opened and closed a connection per request would run out of local ports.
func withCapture(client *http.Client, concurrency int) (*http.Client, *http.Transport) {
	c := &http.Client{}
	if client != nil {
		*c = *client
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	pool, ok := base.(*http.Transport)
	if ok {
		pool = pool.Clone()
		pool.MaxIdleConnsPerHost = max(pool.MaxIdleConnsPerHost, concurrency)
		if pool.MaxIdleConns != 0 {
			pool.MaxIdleConns = max(pool.MaxIdleConns, concurrency)
		}
		base = pool
	}
	c.Transport = capturingTransport{base}
	return c, pool
}

// batcherBacklog is how many batches of items a batcher holds at most:
// beyond it, add waits for the writer (the database is too slow for the
// deliveries).
const batcherBacklog = 16

// batcher writes items in batches, in a goroutine of its own (run): every
// flush interval, or once batch items wait, all the items waiting in one
// call of write. Adding an item does not wait for a write under way (the
// deliveries go on while the attempts log is written), unless
// batcherBacklog batches already wait.
type batcher[T any] struct {
	batch int
	every time.Duration
	// write writes the items; its error is logged by the caller's write.
	write func(ctx context.Context, items []T)
	// full is signalled once batch items wait; stop, closed, once no item
	// comes any more.
	full chan struct{}
	stop chan struct{}

	mu      sync.Mutex
	pending []T
	// room is signalled when the writer took the items waiting.
	room *sync.Cond
}

func newBatcher[T any](batch int, every time.Duration, write func(context.Context, []T)) *batcher[T] {
	b := &batcher[T]{batch: batch, every: every, write: write, full: make(chan struct{}, 1), stop: make(chan struct{})}
	b.room = sync.NewCond(&b.mu)
	return b
}

func (b *batcher[T]) add(item T) {
	b.mu.Lock()
	for len(b.pending) >= batcherBacklog*b.batch {
		b.room.Wait()
	}
	b.pending = append(b.pending, item)
	n := len(b.pending)
	b.mu.Unlock()
	if n == b.batch {
		select {
		case b.full <- struct{}{}:
		default:
		}
	}
}

// close tells run that no item comes any more.
func (b *batcher[T]) close() { close(b.stop) }

// run writes the items added until close is called, then writes the last
// ones.
func (b *batcher[T]) run() {
	tick := time.NewTicker(b.every)
	defer tick.Stop()
	flush := func() {
		b.mu.Lock()
		items := b.pending
		b.pending = nil
		b.room.Broadcast()
		b.mu.Unlock()
		if len(items) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b.write(ctx, items)
	}
	for {
		select {
		case <-b.full:
			flush()
		case <-tick.C:
			flush()
		case <-b.stop:
			flush()
			return
		}
	}
}
