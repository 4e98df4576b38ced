package amqp

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/postbox-go/postbox/sink"
)

// maxShortstr is the longest AMQP short string: a routing key, a header
// name, the type, content_type and message_id properties.
const maxShortstr = 255

// Sizes of a content header frame (AMQP 0-9-1, 4.2.3 and 4.2.6.1): the
// frame's type, channel, size and end octet; its class, weight, body size
// and property flags.
const (
	frameOverhead  = 1 + 2 + 4 + 1
	contentHeader  = 2 + 2 + 8 + 2
	timestampBytes = 8
	deliveryMode   = 1
)

// refusal returns why m, about to be published as pub, is one the protocol
// or the server would refuse (by closing the channel or the connection,
// which would fail every publish in flight), or nil. frameMax is the
// connection's negotiated frame_max, 0 for none.
func (k *Sink) refusal(m *sink.Message, pub *amqp091.Publishing, frameMax int) error {
	for name := range pub.Headers {
		if len(name) > maxShortstr {
			return fmt.Errorf("amqp: event %s: header name %.32q… is %d bytes, over AMQP's %d for a header name", m.ID, name, len(name), maxShortstr)
		}
		if distributionHeader(name) {
			return fmt.Errorf("amqp: event %s: header %q is refused: RabbitMQ would route a copy of the message by it (sender-selected distribution)", m.ID, name)
		}
	}
	if len(pub.Type) > maxShortstr {
		return fmt.Errorf("amqp: event %s: the event type is %d bytes, over AMQP's %d for the type property", m.ID, len(pub.Type), maxShortstr)
	}
	if len(pub.ContentType) > maxShortstr {
		return fmt.Errorf("amqp: event %s: the content type is %d bytes, over AMQP's %d for the content_type property", m.ID, len(pub.ContentType), maxShortstr)
	}
	if len(pub.Body) > k.s.MaxMessageBytes {
		return fmt.Errorf("amqp: event %s: the payload is %d bytes, over Config.MaxMessageBytes of %d (the server's max_message_size)", m.ID, len(pub.Body), k.s.MaxMessageBytes)
	}
	if limit := int(k.serverMax.Load()); limit > 0 && len(pub.Body) > limit {
		return fmt.Errorf("amqp: event %s: the payload is %d bytes, over the server's max_message_size of %d (it refused a larger message; Config.MaxMessageBytes is %d)", m.ID, len(pub.Body), limit, k.s.MaxMessageBytes)
	}
	if size, largest := headerFrameSize(pub); frameMax > 0 && size > frameMax {
		return fmt.Errorf("amqp: event %s: its headers and properties take %d bytes (the largest, header %.64q, %d), over the connection's frame_max of %d bytes",
			m.ID, size, largest, len(largest)+headerValueLen(pub.Headers[largest]), frameMax)
	}
	return nil
}

// distributionHeader reports whether name is one RabbitMQ routes by
// (sender-selected distribution: CC and BCC), in any case: an event's own
// header must not send a copy of it elsewhere, and one of the wrong type
// closes the channel.
func distributionHeader(name string) bool {
	return strings.EqualFold(name, "CC") || strings.EqualFold(name, "BCC")
}

// headerFrameSize is the size of the content header frame of pub, as
// amqp091 writes it: the properties Publish sets, the headers as long
// strings; and the name of its largest header.
func headerFrameSize(pub *amqp091.Publishing) (size int, largest string) {
	size = frameOverhead + contentHeader + deliveryMode + timestampBytes +
		1 + len(pub.ContentType) + 1 + len(pub.MessageId) + 1 + len(pub.Type) + 4
	most := -1
	for name, v := range pub.Headers {
		n := len(name) + headerValueLen(v)
		size += 1 + 1 + 4 + n
		if n > most {
			most, largest = n, name
		}
	}
	return size, largest
}

// headerValueLen is the length of a header's value, a string.
func headerValueLen(v any) int {
	s, _ := v.(string)
	return len(s)
}

// learn records the server's max_message_size when reason, why a channel
// closed, is its refusal of a larger message.
func (k *Sink) learn(reason error) {
	if limit := serverMaxSize(reason); limit > 0 {
		k.serverMax.Store(int64(limit))
	}
}

// serverMaxSize returns the server's max_message_size when err is
// RabbitMQ's refusal of a larger message (406 PRECONDITION_FAILED "message
// size N is larger than configured max size M"), else 0.
func serverMaxSize(err error) int {
	var e *amqp091.Error
	if !errors.As(err, &e) || e.Code != amqp091.PreconditionFailed {
		return 0
	}
	const marker = "larger than configured max size "
	i := strings.Index(e.Reason, marker)
	if i < 0 {
		return 0
	}
	digits := e.Reason[i+len(marker):]
	if end := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); end >= 0 {
		digits = digits[:end]
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return 0
	}
	return n
}
