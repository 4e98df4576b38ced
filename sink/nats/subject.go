package nats

import (
	"errors"
	"fmt"
	"strings"
)

// subjectMaxLen is the longest subject published: well under the server's
// default max_control_line (4 KiB), past which the server would close the
// connection rather than refuse the one message.
const subjectMaxLen = 1024

// checkSubject returns why subject cannot be published to, or nil: it must
// be non-empty, at most subjectMaxLen bytes, without white space or control
// characters, without empty tokens ("a..b", ".a", "a.") and without the
// wildcard tokens "*" and ">". A subject whose first token a placeholder
// filled (dynamicStart) may not begin with "$", so that an event's fields
// never reach the server's $JS or $SYS API subjects.
func checkSubject(subject string, dynamicStart bool) error {
	switch {
	case subject == "":
		return errors.New("the subject is empty")
	case len(subject) > subjectMaxLen:
		return fmt.Errorf("the subject is %d bytes long, more than %d", len(subject), subjectMaxLen)
	case dynamicStart && strings.HasPrefix(subject, "$"):
		return fmt.Errorf("subject %.64q begins with \"$\", reserved to the server's APIs", subject)
	}
	for i := 0; i < len(subject); i++ {
		if c := subject[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("subject %.64q holds white space or a control character", subject)
		}
	}
	for token := range strings.SplitSeq(subject, ".") {
		switch token {
		case "":
			return fmt.Errorf("subject %.64q has an empty token", subject)
		case "*", ">":
			return fmt.Errorf("subject %.64q has the wildcard token %q", subject, token)
		}
	}
	return nil
}

// fixedPrefix returns the whole tokens of template's text before its
// first placeholder, as a filter of the subjects its expansions can take:
// "orders.{event_type}" gives "orders.>", "{event_type}" gives "".
func fixedPrefix(template string) string {
	head, _, _ := strings.Cut(template, "{")
	dot := strings.LastIndexByte(head, '.')
	if dot < 0 {
		return ""
	}
	return head[:dot+1] + ">"
}
