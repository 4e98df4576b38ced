// Package nats is the sink that publishes each message to a NATS JetStream
// stream, with the nats.go client.
//
// A message goes to the subject its Config.Subject template names for the
// event ("orders.{event_type}"); its body is the payload, byte for byte; its
// headers are the broker wire format (sink.BrokerHeaders: Postbox-Event-Id,
// Postbox-Event-Type, Postbox-Aggregate-Type, Postbox-Aggregate-Id,
// Postbox-Attempt, Content-Type, and the event's own, such as traceparent,
// except those named Nats-*, which the server would act upon) plus
// Nats-Msg-Id, the event id, so that the stream's duplicate window
// absorbs the relay's retries: a message published twice within it is
// stored once.
//
// Publish returns nil only once the stream's PubAck arrived. Publishes are
// asynchronous underneath: concurrent Publish calls (the relay's
// deliveries) share one connection and are pipelined, up to
// Config.MaxPending awaiting their PubAck at once.
//
// New connects, then checks that a stream captures the subjects, so that a
// missing stream stops a relay at start with an error saying how to create
// it. The connection reconnects forever in the background.
//
// Failures are classified for the relay (sink.Classify): a connection that
// is down, a PubAck that did not come in time, or no stream answering (no
// responders) are sink.Unavailable; a templated subject that no stream
// captures is sink.Rejected (retried a few times, then failed, so that one
// unexpected event type does not hold up the others); a subject the
// template made invalid, an event header that NATS cannot carry as it is
// (a name that is not printable ASCII without ':', a value with CR or
// LF), headers over JetStream's 64 KiB, a message over the server's
// max_payload (from its INFO, 1 MiB by default) or the stream's maximum
// message size are sink.Permanent (retrying cannot help; such a message is
// never published, but for the stream's limit, which only its PubAck
// tells); other errors are retryable.
package nats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
)

// Sink publishes messages to NATS JetStream. It is safe for concurrent use.
type Sink struct {
	cfg Config // with defaults
	nc  *natsgo.Conn
	js  jetstream.JetStream
	// slots holds one token per publish awaiting its PubAck.
	slots chan struct{}
	// dynamicStart is set when a placeholder fills the subject's first
	// token.
	dynamicStart bool
	// stream describes the stream found at start, for String.
	stream string
}

var _ sink.BatchSink = (*Sink)(nil)

// New connects to c.Servers and checks that a stream captures c.Subject
// (see Config.Stream), each step within c.Timeout. It refuses an invalid
// Config with an error that names the field. Close releases the
// connection.
func New(ctx context.Context, c Config) (*Sink, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &Sink{
		cfg:          c,
		slots:        make(chan struct{}, c.MaxPending),
		dynamicStart: strings.HasPrefix(c.Subject.String(), "{"),
	}
	opts := []natsgo.Option{
		natsgo.Name(c.Name),
		natsgo.Timeout(c.Timeout),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(c.ReconnectWait),
		// No reconnect buffer: a publish while the connection is down
		// fails at once (ErrReconnectBufExceeded: Unavailable), and is
		// never sent later. With nats.go's default 8 MB buffer, a publish
		// the sink had reported Unavailable reached the stream after the
		// reconnect, unseen: the outbox is the buffer, and the relay sends
		// it again when the sink is back.
		natsgo.ReconnectBufSize(-1),
		natsgo.DisconnectErrHandler(func(_ *natsgo.Conn, err error) {
			if err == nil {
				return // closed by Close
			}
			c.Logger.Warn("nats: connection lost; reconnecting", "servers", s.servers(), "error", err)
		}),
		natsgo.ReconnectHandler(func(nc *natsgo.Conn) {
			c.Logger.Info("nats: reconnected", "server", nc.ConnectedUrlRedacted())
		}),
	}
	switch {
	case c.Token != "":
		opts = append(opts, natsgo.Token(c.Token))
	case c.User != "":
		opts = append(opts, natsgo.UserInfo(c.User, c.Password))
	}
	nc, err := natsgo.Connect(strings.Join(c.Servers, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("nats: connect to %s: %w", s.servers(), err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(c.MaxPending), jetstream.WithPublishAsyncTimeout(c.Timeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: %w", err)
	}
	s.nc, s.js = nc, js
	checkCtx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	if s.stream, err = s.checkStream(checkCtx); err != nil {
		nc.Close()
		return nil, err
	}
	return s, nil
}

// checkStream checks that a stream captures the subjects, and returns how
// String describes it.
func (s *Sink) checkStream(ctx context.Context) (string, error) {
	subject := s.cfg.Subject.String()
	filter := subject
	if !s.cfg.Subject.IsFixed() {
		filter = fixedPrefix(subject)
	}
	name := s.cfg.Stream
	if filter != "" {
		found, err := s.js.StreamNameBySubject(ctx, filter)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			return "", fmt.Errorf("nats: no JetStream stream captures subject %s: create one first (stream %s for subjects %q): postbox sink setup --sink URL, or nats.Setup",
				filter, suggestedStream(s.cfg.Stream), filter)
		case err != nil:
			return "", fmt.Errorf("nats: looking for the stream of subject %s: %w", filter, err)
		case name != "" && found != name && s.cfg.Subject.IsFixed():
			return "", fmt.Errorf("nats: subject %s is captured by stream %s, not by stream %s (the URL parameter stream=)", filter, found, name)
		case name == "":
			name = found
		}
	}
	if name == "" {
		return "any stream (the template's subjects cannot be checked at start)", nil
	}
	st, err := s.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return "", fmt.Errorf("nats: stream %s not found: create it first (subjects %q): postbox sink setup --sink URL, or nats.Setup",
			name, exampleSubjects(s.cfg.Subject))
	}
	if err != nil {
		return "", fmt.Errorf("nats: reading stream %s: %w", name, err)
	}
	return fmt.Sprintf("stream %s (duplicate window %s)", name, st.CachedInfo().Config.Duplicates), nil
}

// suggestedStream is the stream name an error's example uses.
func suggestedStream(name string) string {
	if name != "" {
		return name
	}
	return "EVENTS"
}

// exampleSubjects is the subject filter an error's example uses: the
// fixed subject, the template's fixed prefix, or every subject.
func exampleSubjects(t sink.Template) string {
	if t.IsFixed() {
		return t.String()
	}
	return cmp.Or(fixedPrefix(t.String()), ">")
}

// Close closes the connection. Publishes still awaiting a PubAck fail.
func (s *Sink) Close() error {
	s.nc.Close()
	return nil
}

// servers lists the servers' addresses, without credentials.
func (s *Sink) servers() string {
	hosts := make([]string, len(s.cfg.Servers))
	for i, srv := range s.cfg.Servers {
		hosts[i] = strings.TrimPrefix(srv, "nats://")
	}
	return strings.Join(hosts, ",")
}

// String names the destination for logs: the servers, the subject
// template, the stream, the window and the timeout; never a password or
// token.
func (s *Sink) String() string {
	auth := ""
	switch {
	case s.cfg.Token != "":
		auth = " with a token"
	case s.cfg.User != "":
		auth = " with a user and password"
	}
	stream := s.stream
	if stream == "" {
		stream = "stream not checked yet"
	}
	return fmt.Sprintf("nats JetStream %s%s, subject %s, %s, at most %d publishes awaiting their PubAck, timeout %s",
		s.servers(), auth, s.cfg.Subject, stream, s.cfg.MaxPending, s.cfg.Timeout)
}

// Destination names the destination for traces: System "nats", Name the
// subject template (of low cardinality, unlike the subjects it expands to).
func (s *Sink) Destination() sink.Destination {
	return sink.Destination{System: "nats", Name: s.cfg.Subject.String()}
}

// Publish publishes m and returns nil once the stream acknowledged it. It
// waits for a free slot while MaxPending publishes await their PubAck, then
// at most Timeout for the PubAck.
func (s *Sink) Publish(ctx context.Context, m *sink.Message) error {
	p := s.send(ctx, m, true)
	if p.err != nil {
		return p.err
	}
	return s.await(ctx, m, p)
}

// PublishBatch publishes msgs in a row and then waits for their PubAcks,
// setting errs[i] to what Publish would have returned for msgs[i]: the
// relay's batches (relay.Config.PublishBatch) cost no goroutine per message
// waiting for its PubAck. When every slot is taken (MaxPending), it waits
// for the PubAcks of what it sent before it takes more.
func (s *Sink) PublishBatch(ctx context.Context, msgs []*sink.Message, errs []error) {
	sent := make([]pending, len(msgs))
	awaited := 0 // msgs[:awaited] have their outcome
	for i, m := range msgs {
		p := s.send(ctx, m, false)
		if p.full {
			for ; awaited < i; awaited++ {
				errs[awaited] = s.outcome(ctx, msgs[awaited], sent[awaited])
			}
			p = s.send(ctx, m, true)
		}
		sent[i] = p
	}
	for ; awaited < len(msgs); awaited++ {
		errs[awaited] = s.outcome(ctx, msgs[awaited], sent[awaited])
	}
}

// pending is a message sent, awaiting its PubAck, or the error that kept
// it from being sent; full: it was not sent, no slot being free.
type pending struct {
	paf     jetstream.PubAckFuture
	subject string
	err     error
	full    bool
}

// outcome is the error of the message m sent as p: p's own, or what its
// PubAck brings.
func (s *Sink) outcome(ctx context.Context, m *sink.Message, p pending) error {
	if p.err != nil {
		return p.err
	}
	return s.await(ctx, m, p)
}

// send publishes m without waiting for its PubAck, once it has a slot:
// waiting for one when wait is set, else returning a full pending when
// there is none.
func (s *Sink) send(ctx context.Context, m *sink.Message, wait bool) pending {
	subject := s.cfg.Subject.Expand(&m.Event)
	if err := checkSubject(subject, s.dynamicStart); err != nil {
		return pending{err: &sink.Error{Kind: sink.Permanent, Err: fmt.Errorf("nats: event %s: template %s: %w", m.ID, s.cfg.Subject, err)}}
	}
	var headers headerCheck
	msg := newMsg(subject, m, &headers)
	if err := headers.refusal(m, len(msg.Data), s.nc.MaxPayload()); err != nil {
		return pending{err: &sink.Error{Kind: sink.Permanent, Err: err}}
	}
	if err := ctx.Err(); err != nil {
		return pending{err: fmt.Errorf("nats: %w", context.Cause(ctx))}
	}
	select {
	case s.slots <- struct{}{}:
	default:
		if !wait {
			return pending{full: true}
		}
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return pending{err: fmt.Errorf("nats: waiting for a free publish slot: %w", context.Cause(ctx))}
		}
	}
	if status := s.nc.Status(); status != natsgo.CONNECTED {
		<-s.slots
		return pending{err: &sink.Error{Kind: sink.Unavailable, Err: fmt.Errorf("nats: not connected to %s (%s)", s.servers(), status)}}
	}
	paf, err := s.js.PublishMsgAsync(msg)
	if err != nil {
		<-s.slots
		return pending{err: s.failure(ctx, m, subject, err)}
	}
	return pending{paf: paf, subject: subject}
}

// await waits for the PubAck of m, sent as p, and frees its slot.
func (s *Sink) await(ctx context.Context, m *sink.Message, p pending) error {
	select {
	case <-p.paf.Ok():
		<-s.slots
		return nil
	case err := <-p.paf.Err():
		<-s.slots
		return s.failure(ctx, m, p.subject, err)
	case <-ctx.Done():
		// The PubAck, a failure or the timeout will come: the slot is
		// taken until then.
		go func() {
			select {
			case <-p.paf.Ok():
			case <-p.paf.Err():
			}
			<-s.slots
		}()
		return fmt.Errorf("nats: waiting for the PubAck: %w", context.Cause(ctx))
	}
}

// wireHeaders is the number of headers newMsg sets besides the event's
// own: those of sink.BrokerHeaders and Nats-Msg-Id.
const wireHeaders = 7

// newMsg is the message of m for subject, each header given to check as
// it is set. Its headers share one backing array of values: a message is
// built per event, at the rate of the drain.
func newMsg(subject string, m *sink.Message, check *headerCheck) *natsgo.Msg {
	n := len(m.Headers) + wireHeaders
	header := make(natsgo.Header, n)
	values := make([]string, 0, n)
	set := func(name, value string) {
		check.add(name, value)
		values = append(values, value)
		header[name] = values[len(values)-1 : len(values) : len(values)]
	}
	sink.BrokerHeaders(m, func(name, value string) {
		if !isServerHeader(name) {
			set(name, value)
		}
	})
	set(jetstream.MsgIDHeader, header[postbox.HeaderEventID][0])
	return &natsgo.Msg{Subject: subject, Header: header, Data: m.Payload}
}

// uncaptured reports whether the server says that no stream captures
// subject: then a templated subject, not the broker, is at fault. When the
// server cannot tell (a cluster electing leaders), it reports false.
func (s *Sink) uncaptured(ctx context.Context, subject string) bool {
	ctx, cancel := context.WithTimeout(ctx, min(s.cfg.Timeout, 2*time.Second))
	defer cancel()
	_, err := s.js.StreamNameBySubject(ctx, subject)
	return errors.Is(err, jetstream.ErrStreamNotFound)
}

// isServerHeader reports whether name is a header the server acts upon
// (Nats-Msg-Id, Nats-Rollup, Nats-Expected-*...): an event's own header of
// that kind is not sent, so that it can neither change the message id nor
// purge or guard the stream.
func isServerHeader(name string) bool {
	return len(name) >= 5 && strings.EqualFold(name[:5], "nats-")
}

// failure classifies the error of publishing m to subject.
func (s *Sink) failure(ctx context.Context, m *sink.Message, subject string, err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, natsgo.ErrMaxPayload):
		return &sink.Error{Kind: sink.Permanent, Err: fmt.Errorf("nats: event %s: the payload (%d bytes) and headers exceed the server's max_payload of %d bytes: %w",
			m.ID, len(m.Payload), s.nc.MaxPayload(), err)}
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		return &sink.Error{Kind: sink.Permanent, Err: fmt.Errorf("nats: event %s: the payload (%d bytes) exceeds the stream's maximum message size: %w",
			m.ID, len(m.Payload), err)}
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrHeaderExceedsMaximum:
		return &sink.Error{Kind: sink.Permanent, Err: fmt.Errorf("nats: event %s: its headers exceed the stream's maximum: %w", m.ID, err)}
	case errors.Is(err, natsgo.ErrBadSubject), errors.Is(err, natsgo.ErrBadHeaderMsg):
		return &sink.Error{Kind: sink.Permanent, Err: fmt.Errorf("nats: event %s to subject %.64q: %w", m.ID, subject, err)}
	case errors.Is(err, natsgo.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse):
		if !s.cfg.Subject.IsFixed() && s.uncaptured(ctx, subject) {
			return &sink.Error{Kind: sink.Rejected, Err: fmt.Errorf("nats: event %s: no JetStream stream captures subject %.64q, which template %s gave it", m.ID, subject, s.cfg.Subject)}
		}
		return &sink.Error{Kind: sink.Unavailable, Err: fmt.Errorf("nats: no stream answered on subject %.64q (it has no leader, or none captures it): %w", subject, err)}
	case errors.Is(err, jetstream.ErrAsyncPublishTimeout):
		return &sink.Error{Kind: sink.Unavailable, Err: fmt.Errorf("nats: no PubAck within %s: %w", s.cfg.Timeout, err)}
	case errors.Is(err, natsgo.ErrDisconnected), errors.Is(err, natsgo.ErrConnectionClosed),
		errors.Is(err, natsgo.ErrConnectionReconnecting), errors.Is(err, natsgo.ErrReconnectBufExceeded),
		errors.Is(err, natsgo.ErrConnectionDraining), errors.Is(err, natsgo.ErrTimeout):
		return &sink.Error{Kind: sink.Unavailable, Err: fmt.Errorf("nats: %s: %w", s.servers(), err)}
	}
	return fmt.Errorf("nats: publish to %.64q: %w", subject, err)
}
