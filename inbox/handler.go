package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/signature"
)

// Defaults of HandlerConfig.
const (
	// MaxBodyBytesDefault is the largest request body accepted: 1 MiB.
	MaxBodyBytesDefault = 1 << 20
	// RetryAfterDefault is the Retry-After of "try again later" answers.
	RetryAfterDefault = 10 * time.Second
)

// Headers of event metadata besides the signature headers: the names of
// the postbox wire format (package postbox). A postbox sender signs them into
// HeaderMetadataSignature (see MetadataPolicy).
const (
	// HeaderEventType, HeaderAggregateType and HeaderAggregateID are sent
	// by the relay's sinks (see the wire format in package postbox).
	HeaderEventType     = postbox.HeaderEventType
	HeaderAggregateType = postbox.HeaderAggregateType
	HeaderAggregateID   = postbox.HeaderAggregateID
	// HeaderSequence is the event's per-aggregate sequence number (Event.Seq),
	// when the sender sets it; the relay sends it when the event's own
	// headers hold it. A Process function may take the number from the
	// signed payload instead.
	HeaderSequence = signature.HeaderSequence
	// HeaderMetadataSignature is the signature of the four headers above,
	// with the event id and the timestamp (signature.Verifier.VerifyMetadata).
	HeaderMetadataSignature = signature.HeaderMetadataSignature
)

// MetadataPolicy is where the webhook handler takes an event's metadata
// (Event.EventType, AggregateType, AggregateID and Seq) from. The zero
// value, MetadataSigned, is the safe one: the others are for senders that
// are not postbox.
type MetadataPolicy int

const (
	// MetadataSigned takes the metadata from the Postbox-* headers only
	// when the metadata signature (HeaderMetadataSignature, which postbox
	// senders make with the same secret as the body's) covers them, with
	// the request's id and timestamp. A request without it is refused with
	// 400, one whose metadata does not match it with 401; neither stores
	// anything. The default.
	MetadataSigned MetadataPolicy = iota
	// MetadataIgnored reads no Postbox-* header: the event reaches
	// Process with empty metadata, for Process to set from the signed
	// payload (for instance ev.EventType from a "type" field). For senders
	// that sign the body only, when the payload names its type.
	MetadataIgnored
	// MetadataUnsigned trusts the Postbox-* headers of a request without a
	// metadata signature, as they came (a request with one is still
	// checked, as under MetadataSigned). Anyone on the path can then change
	// them, and so which handler runs and in which order: a captured
	// delivery re-sent first with an ignored event type is recorded done,
	// and the genuine one becomes a duplicate. Only for senders that
	// cannot sign metadata, on a path nobody else can write to.
	MetadataUnsigned
)

// String returns "signed", "ignored" or "unsigned".
func (p MetadataPolicy) String() string {
	switch p {
	case MetadataSigned:
		return "signed"
	case MetadataIgnored:
		return "ignored"
	case MetadataUnsigned:
		return "unsigned"
	}
	return fmt.Sprintf("MetadataPolicy(%d)", int(p))
}

// HandlerConfig configures the webhook handler. Process and Secrets are
// required; the zero value of every other field means its default.
type HandlerConfig struct {
	// Process applies one verified event, usually by calling Inbox.Process
	// (or the Claim flow) with the application's handler. It may adjust ev
	// first, for instance set ev.Seq from the signed payload. Its outcome
	// and error decide the answer (see Handler). Required.
	Process func(ctx context.Context, ev *Event) (Outcome, error)

	// Secrets verify the signatures: a request signed with any one of them
	// is accepted, so a secret can be rotated without downtime (add the
	// new one here, move the sender to it, then remove the old one). See
	// package signature for their forms; at least one is required.
	Secrets []string

	// Scheme is the sender's signature scheme (default signature.Standard).
	// With signature.XSignature the event id header is not signed, so the
	// JSON body must repeat it in its "event_id" field, which is signed.
	Scheme signature.Scheme
	// HeaderNames are the names of the id, timestamp and signature headers
	// when the sender uses other names than the scheme's (an endpoint's
	// signature profile: postbox endpoints add --signature svix, or
	// "standard;prefix=acme"); zero: the scheme's own. See
	// signature.ParseProfile, whose Profile gives Scheme and HeaderNames.
	HeaderNames signature.HeaderNames

	// Metadata is where the event type, aggregate and sequence number
	// come from (default MetadataSigned: the Postbox-* headers, covered by
	// the metadata signature postbox senders make, or the request is
	// refused). See MetadataPolicy.
	Metadata MetadataPolicy

	// Tolerance is how far a request's signed timestamp may be from this
	// server's clock, either way (default signature.ToleranceDefault, 5
	// minutes). Older requests are refused as replays.
	Tolerance time.Duration

	// MaxBodyBytes is the largest request body read (default
	// MaxBodyBytesDefault, 1 MiB); larger ones are answered 413.
	MaxBodyBytes int64

	// AllowedNetworks, when not empty, are the only source networks
	// accepted; requests from elsewhere are answered 403 before their body
	// is read. The source is the connection's remote address: behind a
	// reverse proxy or load balancer that is the proxy's address, so
	// filter there instead (this handler never trusts X-Forwarded-For).
	AllowedNetworks []netip.Prefix

	// RetryAfter is sent with 503 answers to events that are out of order
	// or in progress, for the sender to wait (default RetryAfterDefault).
	RetryAfter time.Duration

	// Logger receives a line per refused or failed request, with the event
	// id and the reason; never secrets, signatures or bodies. Default
	// slog.Default().
	Logger *slog.Logger

	// Tracer, when set, runs Process in a process span (kind consumer), a
	// child of the request's W3C traceparent (a new trace without one),
	// with the event id (messaging.message.id), postbox.event_type,
	// postbox.aggregate_type and postbox.outcome (processed, duplicate,
	// failed, rejected); Process's context carries the span. Default nil:
	// no span, at no cost.
	Tracer trace.Tracer
}

// Handler is the webhook endpoint of an inbox: an http.Handler that
// verifies, decodes and processes signed event deliveries. It is safe for
// concurrent use.
//
// It answers, with a small JSON body {"status": "..."}:
//
//	200 processed   the event was applied
//	200 duplicate   the event had been applied before
//	400             malformed request (JSON, event id, Postbox-* header),
//	                metadata without a metadata signature (MetadataSigned),
//	                or an event its Process rejected (Reject, a payload
//	                that does not decode, an event type with no route)
//	401             signature, metadata signature, timestamp or
//	                (XSignature) event_id invalid
//	403             source address not in AllowedNetworks
//	405             not a POST
//	409             sequence number already taken by another event
//	413             body larger than MaxBodyBytes
//	500             Process failed: the sender retries
//	503             out of order, or claimed by another delivery: the
//	                sender retries after Retry-After
//
// A malformed or unverifiable request stores nothing; an event rejected by
// its Process leaves a failed inbox row with the reason, for inspection.
// Internal errors are logged, never sent.
type Handler struct {
	cfg      HandlerConfig
	verifier *signature.Verifier
	// sigHeader is the signature header of the scheme, stored for audit.
	sigHeader string
	// retryAfter is the Retry-After header value, in whole seconds.
	retryAfter string
}

// NewHandler returns the webhook handler configured by cfg, or an error
// naming the field that is wrong.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Process == nil {
		return nil, errors.New("inbox: HandlerConfig.Process is nil")
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = MaxBodyBytesDefault
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("inbox: HandlerConfig.MaxBodyBytes %d is negative", cfg.MaxBodyBytes)
	}
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = RetryAfterDefault
	}
	if cfg.RetryAfter < 0 {
		return nil, fmt.Errorf("inbox: HandlerConfig.RetryAfter %v is negative", cfg.RetryAfter)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	for i, p := range cfg.AllowedNetworks {
		if !p.IsValid() {
			return nil, fmt.Errorf("inbox: HandlerConfig.AllowedNetworks[%d] is not a valid prefix", i)
		}
	}
	switch cfg.Metadata {
	case MetadataSigned, MetadataIgnored, MetadataUnsigned:
	default:
		return nil, fmt.Errorf("inbox: HandlerConfig.Metadata %v is not a policy", cfg.Metadata)
	}
	if cfg.Tolerance < 0 {
		return nil, fmt.Errorf("inbox: HandlerConfig.Tolerance %v is negative", cfg.Tolerance)
	}
	profile := signature.Profile{Scheme: cfg.Scheme, Names: cfg.HeaderNames}
	v, err := signature.NewProfileVerifier(profile, cfg.Tolerance, cfg.Secrets...)
	if errors.Is(err, signature.ErrUnknownScheme) {
		return nil, fmt.Errorf("inbox: HandlerConfig.Scheme: %w", err)
	}
	if errors.Is(err, signature.ErrInvalidProfile) {
		return nil, fmt.Errorf("inbox: HandlerConfig.HeaderNames: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("inbox: HandlerConfig.Secrets: %w", err)
	}
	h := &Handler{
		cfg:        cfg,
		verifier:   v,
		retryAfter: strconv.FormatInt(int64(math.Ceil(cfg.RetryAfter.Seconds())), 10),
	}
	h.sigHeader = profile.HeaderNames().Signature
	return h, nil
}

// ServeHTTP verifies and processes one delivery.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		respond(w, http.StatusMethodNotAllowed, statusMethodNotAllowed)
		return
	}
	if !h.allowed(r) {
		h.refuse(w, r, http.StatusForbidden, statusForbidden, "source address not allowed", nil)
		return
	}
	ev, rej := h.decode(w, r)
	if rej != nil {
		h.refuse(w, r, rej.code, rej.status, rej.reason, rej.err)
		return
	}
	outcome, err := h.process(r.Context(), r.Header, ev)
	h.answer(w, r, ev, outcome, err)
}

// allowed reports whether the request comes from an allowed network.
func (h *Handler) allowed(r *http.Request) bool {
	if len(h.cfg.AllowedNetworks) == 0 {
		return true
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	addr := ap.Addr().Unmap()
	for _, p := range h.cfg.AllowedNetworks {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
