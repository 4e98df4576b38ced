package signature

import (
	"fmt"
	"net/http"
	"strings"
)

// The headers of the event metadata that a metadata signature covers, and
// the header that carries it. They are the names of the postbox wire format
// (the root package's wire.go).
const (
	HeaderEventType     = "Postbox-Event-Type"
	HeaderAggregateType = "Postbox-Aggregate-Type"
	HeaderAggregateID   = "Postbox-Aggregate-Id"
	HeaderSequence      = "Postbox-Sequence"
	// HeaderMetadataSignature holds the signature of the metadata, in the
	// form of the scheme's signature header: "v1,<base64>" and
	// "v1a,<base64>" entries in Standard, "sha256=<hex>" in XSignature.
	HeaderMetadataSignature = "Postbox-Metadata-Signature"
)

// metadataVersion starts the signed metadata content. It is not JSON, so
// the content can never be taken for a JSON body, nor a body for it.
const metadataVersion = "postbox-metadata-v1"

// metadataHeaders are the covered headers, in the order of the content.
var metadataHeaders = [...]string{HeaderEventType, HeaderAggregateType, HeaderAggregateID, HeaderSequence}

// Metadata is what a metadata signature covers besides the event id and the
// timestamp: the values of the covered headers, "" for one that is absent,
// trimmed of spaces and tabs at both ends as HTTP servers trim them.
type Metadata struct {
	EventType     string // Postbox-Event-Type
	AggregateType string // Postbox-Aggregate-Type
	AggregateID   string // Postbox-Aggregate-Id
	Sequence      string // Postbox-Sequence, as sent (not parsed)
}

// metadataOf reads the covered headers of h. A header given several times,
// or whose value holds a line break, makes ErrMalformedHeader: it could not
// be told apart from another header in the signed content, and a receiver
// would not know which value was meant.
func metadataOf(h http.Header) (Metadata, error) {
	var values [len(metadataHeaders)]string
	for i, name := range metadataHeaders {
		vs := h[name]
		if len(vs) > 1 {
			return Metadata{}, fmt.Errorf("%w: %s is given %d times", ErrMalformedHeader, name, len(vs))
		}
		if len(vs) == 1 {
			values[i] = strings.Trim(vs[0], " \t")
		}
		if strings.ContainsAny(values[i], "\r\n") {
			return Metadata{}, fmt.Errorf("%w: %s holds a line break", ErrMalformedHeader, name)
		}
	}
	return Metadata{EventType: values[0], AggregateType: values[1], AggregateID: values[2], Sequence: values[3]}, nil
}

// appendContent appends the signed content of md for event id to dst:
//
//	postbox-metadata-v1 LF id LF event type LF aggregate type LF aggregate id LF sequence
//
// No value holds a line break (metadataOf), so the content is unambiguous.
func (md Metadata) appendContent(dst []byte, id string) []byte {
	for _, s := range [...]string{metadataVersion, id, md.EventType, md.AggregateType, md.AggregateID} {
		dst = append(append(dst, s...), '\n')
	}
	return append(dst, md.Sequence...)
}

// contentLen is the length of the signed content of md for event id.
func (md Metadata) contentLen(id string) int {
	return len(metadataVersion) + len(id) + len(md.EventType) + len(md.AggregateType) + len(md.AggregateID) + len(md.Sequence) + 5
}
