package inbox

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/signature"
)

// metadataMaxLen bounds the event type, aggregate type and aggregate id
// taken into an event from Postbox-* headers.
const metadataMaxLen = 255

// rejection is why a request is refused before it is processed.
type rejection struct {
	code   int
	status string
	reason string
	err    error
}

func reject(code int, status, reason string, err error) *rejection {
	return &rejection{code: code, status: status, reason: reason, err: err}
}

// decode reads, verifies and decodes a delivery into an event. The body is
// bounded, and its signature verified before anything of it is parsed.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request) (*Event, *rejection) {
	body, err := readBody(w, r, h.cfg.MaxBodyBytes)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, reject(http.StatusRequestEntityTooLarge, statusTooLarge, "body too large", nil)
		}
		return nil, reject(http.StatusBadRequest, statusBadRequest, "reading the body failed", err)
	}
	headerID, _, err := h.verifier.Verify(r.Header, body)
	if err != nil {
		return nil, reject(http.StatusUnauthorized, statusUnauthorized, "signature verification failed", err)
	}
	// The body is authentic from here on.
	id, rej := h.eventID(headerID, body)
	if rej != nil {
		return nil, rej
	}
	ev := &Event{ID: id, Payload: body, Signature: r.Header.Get(h.sigHeader)}
	if rej := h.metadata(r.Header, ev); rej != nil {
		return nil, rej
	}
	return ev, nil
}

// metadata sets the event type, aggregate and sequence number of ev by the
// handler's MetadataPolicy: from headers the metadata signature covers, or
// the headers as they came (MetadataUnsigned, without a metadata
// signature), or not at all (MetadataIgnored).
func (h *Handler) metadata(header http.Header, ev *Event) *rejection {
	if h.cfg.Metadata == MetadataIgnored {
		return nil
	}
	// Bounded before anything is signed to check them: a replayed request
	// with a megabyte of header costs no more than a short one.
	for _, name := range [...]string{HeaderEventType, HeaderAggregateType, HeaderAggregateID, HeaderSequence} {
		for _, v := range header[name] {
			if len(v) > metadataMaxLen {
				return reject(http.StatusBadRequest, statusBadRequest, "Postbox-* header too long", nil)
			}
		}
	}
	md, err := h.verifier.VerifyMetadata(header)
	switch {
	case errors.Is(err, signature.ErrMetadataUnsigned) && h.cfg.Metadata == MetadataUnsigned:
		md = signature.Metadata{
			EventType:     header.Get(HeaderEventType),
			AggregateType: header.Get(HeaderAggregateType),
			AggregateID:   header.Get(HeaderAggregateID),
			Sequence:      header.Get(HeaderSequence),
		}
	case errors.Is(err, signature.ErrMetadataUnsigned):
		return reject(http.StatusBadRequest, statusBadRequest, "metadata not signed: no "+HeaderMetadataSignature+" header (see inbox.MetadataPolicy for senders that are not postbox)", err)
	case errors.Is(err, signature.ErrMalformedHeader):
		return reject(http.StatusBadRequest, statusBadRequest, "malformed Postbox-* header", err)
	case err != nil:
		return reject(http.StatusUnauthorized, statusUnauthorized, "metadata signature verification failed", err)
	}
	ev.EventType, ev.AggregateType, ev.AggregateID = md.EventType, md.AggregateType, md.AggregateID
	if md.Sequence != "" {
		seq, err := strconv.ParseInt(md.Sequence, 10, 64)
		if err != nil || seq < 1 {
			return reject(http.StatusBadRequest, statusBadRequest, HeaderSequence+" is not a positive integer", nil)
		}
		ev.Seq = seq
	}
	return nil
}

// eventID checks that the verified body is JSON and returns the event id.
// With a scheme that does not sign the id header (XSignature), the signed
// body's "event_id" must name the same id, or the request could be a
// captured one replayed under a fresh id to get past the inbox.
func (h *Handler) eventID(headerID string, body []byte) (uuid.UUID, *rejection) {
	if h.cfg.Scheme.SignsID() {
		if !json.Valid(body) {
			return uuid.Nil, reject(http.StatusBadRequest, statusBadRequest, "body is not valid JSON", nil)
		}
		id, err := uuid.Parse(headerID)
		if err != nil || id == uuid.Nil {
			return uuid.Nil, reject(http.StatusBadRequest, statusBadRequest, "event id is not a UUID", nil)
		}
		return id, nil
	}
	var signed struct {
		EventID *string `json:"event_id"`
	}
	if err := json.Unmarshal(body, &signed); err != nil {
		if _, ok := errors.AsType[*json.SyntaxError](err); ok {
			return uuid.Nil, reject(http.StatusBadRequest, statusBadRequest, "body is not valid JSON", nil)
		}
		return uuid.Nil, reject(http.StatusUnauthorized, statusUnauthorized, `body is not an object with a string "event_id"`, nil)
	}
	if signed.EventID == nil {
		return uuid.Nil, reject(http.StatusUnauthorized, statusUnauthorized, `body has no "event_id" to check the unsigned `+signature.XSignature.String()+" id against", nil)
	}
	id, err := uuid.Parse(*signed.EventID)
	if err != nil || id == uuid.Nil {
		return uuid.Nil, reject(http.StatusBadRequest, statusBadRequest, `body "event_id" is not a UUID`, nil)
	}
	if hid, err := uuid.Parse(headerID); err != nil || hid != id {
		return uuid.Nil, reject(http.StatusUnauthorized, statusUnauthorized, `event id header differs from the signed body "event_id"`, nil)
	}
	return id, nil
}

// readBody reads at most limit bytes of the body; a longer body is a
// *http.MaxBytesError (and the connection is closed after the answer).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	size := int64(512)
	if r.ContentLength >= 0 {
		size = r.ContentLength + 1 // room to read EOF without growing
	}
	buf := make([]byte, 0, size)
	for {
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}
