package nats

import (
	"fmt"
	"strings"

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

// headerCheck follows the headers of a message as they are set: the size
// of their block, and the first that NATS cannot carry as it is.
type headerCheck struct {
	size int
	// name is the first header whose name is not printable ASCII without
	// ':' (ADR-4, as nats.go checks it), or whose value holds a CR or LF
	// (which nats.go would replace with spaces); badValue tells which.
	name     string
	bad      bool
	badValue bool
}

// add follows one header. Its value is counted whole, though nats.go
// trims its spaces: the block may be reckoned larger than it is, never
// smaller.
func (c *headerCheck) add(name, value string) {
	if c.size == 0 {
		c.size = len(headerLine) + 2
	}
	c.size += len(name) + len(value) + headerOverhead
	if c.bad {
		return
	}
	if !validHeaderName(name) {
		c.name, c.bad = name, true
	} else if strings.IndexByte(value, '\r') >= 0 || strings.IndexByte(value, '\n') >= 0 {
		c.name, c.bad, c.badValue = name, true, true
	}
}

// refusal returns why the message of event m, whose headers c followed and
// whose payload is payload bytes, is one NATS or JetStream would refuse or
// alter, or nil: a header c found bad, headers over JetStream's 64 KiB, or
// headers and payload over the server's max_payload, from its INFO.
func (c *headerCheck) refusal(m *sink.Message, payload int, maxPayload int64) error {
	switch {
	case c.bad && c.badValue:
		return fmt.Errorf("nats: event %s: the value of header %.64q holds a CR or LF", m.ID, c.name)
	case c.bad:
		return fmt.Errorf("nats: event %s: header name %.64q is not printable ASCII without ':' (NATS ADR-4)", m.ID, c.name)
	case c.size > maxHeaderBytes:
		return fmt.Errorf("nats: event %s: its headers take %d bytes, which exceed JetStream's %d", m.ID, c.size, maxHeaderBytes)
	}
	if total := int64(c.size + payload); total > maxPayload {
		return fmt.Errorf("nats: event %s: the payload (%d bytes) and headers take %d bytes, which exceed the server's max_payload of %d",
			m.ID, payload, total, maxPayload)
	}
	return nil
}

// validHeaderName reports whether name is a header name nats.go sends:
// printable ASCII but for the separators it refuses.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !headerNameChars[name[i]] {
			return false
		}
	}
	return true
}

// headerNameChars are the bytes of a header name nats.go sends.
var headerNameChars = func() (ok [256]bool) {
	for c := '!'; c <= '~'; c++ {
		ok[c] = !strings.ContainsRune(`"()/,:;<=>?@[\]{}`, c)
	}
	return ok
}()
