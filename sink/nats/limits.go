package nats

import (
	"fmt"
	"strings"

	natsgo "github.com/nats-io/nats.go"

	"github.com/postbox-go/postbox/sink"
)

const (
	// maxHeaderBytes is JetStream's limit on a message's header block
	// (64 KiB less a byte): a larger one is refused in the PubAck.
	maxHeaderBytes = 1<<16 - 1
	// jsErrHeaderExceedsMaximum is the PubAck's error code for it.
	jsErrHeaderExceedsMaximum = 10097
	// headerLine and the blank line after the headers frame a header
	// block; each header adds ": " and CR LF to its name and value.
	headerLine     = "NATS/1.0\r\n"
	headerOverhead = 4
)

// refusal returns why msg, the message of event m, is one NATS or
// JetStream would refuse or alter, or nil: a header name that is not
// printable ASCII without ':' (ADR-4, as nats.go checks it), a value with
// CR or LF (which nats.go would replace with spaces), headers over
// JetStream's 64 KiB, or headers and payload over the server's
// max_payload, from its INFO.
func refusal(m *sink.Message, msg *natsgo.Msg, maxPayload int64) error {
	size := len(headerLine) + 2
	for name, values := range msg.Header {
		if !validHeaderName(name) {
			return fmt.Errorf("nats: event %s: header name %.64q is not printable ASCII without ':' (NATS ADR-4)", m.ID, name)
		}
		for _, v := range values {
			if strings.ContainsAny(v, "\r\n") {
				return fmt.Errorf("nats: event %s: the value of header %.64q holds a CR or LF", m.ID, name)
			}
			size += len(name) + len(v) + headerOverhead
		}
	}
	if size > maxHeaderBytes {
		return fmt.Errorf("nats: event %s: its headers take %d bytes, which exceed JetStream's %d", m.ID, size, maxHeaderBytes)
	}
	if total := int64(size + len(msg.Data)); total > maxPayload {
		return fmt.Errorf("nats: event %s: the payload (%d bytes) and headers take %d bytes, which exceed the server's max_payload of %d",
			m.ID, len(msg.Data), total, maxPayload)
	}
	return nil
}

// validHeaderName reports whether name is a header name nats.go sends:
// printable ASCII but for the separators it refuses.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if c < '!' || c > '~' || strings.IndexByte(`"()/,:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
