package sink

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/postbox-go/postbox/internal/redact"
)

// URLKind is a kind of sink that a URL names by its scheme: what a program
// that takes a sink URL (postbox relay --sink) needs of it besides the
// sub-package's own Config. Each sub-package exports its own (webhook.URL,
// nats.URL, amqp.URL, kafka.URL); a program lists those it offers and finds
// a URL's with Lookup, so that adding a sink is one package and one line
// in that list. The list is the program's, not a registry of this package,
// so that what a program offers is what it says, with nothing registered
// behind its back by an import.
type URLKind struct {
	// Name names the kind in messages: "webhook", "nats".
	Name string
	// Schemes are the schemes of the kind's URLs, in lower case, at least
	// one: the first is the one Lookup suggests to a text that is not a
	// URL.
	Schemes []string
	// Concurrency is the publishes a relay keeps in flight at once by
	// default: a few dozen for one request each (a webhook), many more
	// for a broker whose publishes are pipelined on one connection, each
	// waiting a few milliseconds for its acknowledgement.
	Concurrency int
	// PublishBatch is the relay's default relay.Config.PublishBatch, the
	// events handed over at once: above 1 only for a kind whose sinks
	// are BatchSinks, 1 for the others.
	PublishBatch int
	// Open opens the sink of u, whose scheme is one of Schemes; it must
	// not modify u. A broker's sink connects at once and checks that its
	// destination exists, so that a program stops at start with an error
	// naming what is missing. A sink that holds connections implements
	// io.Closer, which releases them once the caller is done with it.
	// Open refuses its URL or options with an *OptionError, before
	// anything is opened; its other errors are the destination's.
	Open func(ctx context.Context, u *url.URL, o URLOptions) (Sink, error)
	// Describe describes u, one of the kind's URLs, for what others
	// read (the relays' presence table, which postbox status and the
	// console show): the kind and what tells its destination apart, never
	// a credential; and returns the parts of u that must never be shown
	// there, which a sink's error may quote (a token in a webhook's path,
	// the values of parameters that may hold credentials: DescribeQuery).
	// Callers use the package's Describe, which adds the password and the
	// options' secrets. Nil: the kind's name, u's scheme and host, and
	// every value of u's query a secret.
	Describe func(u *url.URL) (desc string, secrets []string)
	// Setup, when set, is the kind's part of "postbox sink setup": it
	// registers the kind's own settings on fs, as flags whose help begins
	// with the kind's Name (their names distinct from the other kinds'),
	// and returns what creates the resources the kind's sinks need (see
	// SetupFunc). Nil: the kind's sinks need nothing created (a
	// webhook).
	Setup func(fs *flag.FlagSet) SetupFunc
	// SetupAlternative, when set, says what else than Setup gives a sink
	// the resources it finds missing at start (Kafka: a URL parameter
	// that lets the brokers create topics), for the error that points to
	// the setup.
	SetupAlternative string
}

// URLOptions are the settings a program gives every URLKind's Open; each
// kind reads those that apply to it, and its URL's own parameters win
// over them where both say the same thing.
type URLOptions struct {
	// Timeout bounds one publish: a webhook request, the wait for a
	// broker's acknowledgement.
	Timeout time.Duration
	// Concurrency is the most publishes the caller keeps in flight at
	// once, which a sink with a window of its own (NATS's pending
	// PubAcks, a webhook's connections) makes room for.
	Concurrency int
	// Logger receives the sink's lines (a broker connection lost and
	// back).
	Logger *slog.Logger
	// User and Password are a broker's credentials given apart from its
	// URL, so that they need not be written in it (and a process
	// listing): a broker kind uses them when the URL has no user
	// information of its own (WithCredentials). A webhook ignores them.
	User, Password string
	// Secrets and Signature sign a webhook's requests: its keys (one, or
	// several during a rotation) and the name of its signature scheme,
	// as signature.ParseScheme reads it; the webhook requires Secrets.
	// Brokers ignore both, a Signature they would refuse included.
	Secrets   []string
	Signature string
	// HTTPClient, when set, is the client a webhook sends through, shared
	// with the other sinks given it (their keep-alive connections to the
	// same hosts shared); nil: the webhook makes its own. Brokers ignore
	// it.
	HTTPClient *http.Client
}

// OptionError is how Open and Lookup refuse a URL or an option before
// anything is opened: the caller's mistake, which no retry mends (a
// program reports it as a usage error), as opposed to a destination that
// cannot be reached or lacks what the sink needs.
type OptionError struct {
	// Option names what is refused: "URL", or the URLOptions field
	// ("Secrets", "Signature"); empty when the kind's own configuration
	// refused the whole, its error naming the field.
	Option string
	// Err says why: ErrRequired for an option the kind needs and was not
	// given. It never holds a password.
	Err error
}

// ErrRequired is the Err of an OptionError for an option that is missing.
var ErrRequired = errors.New("required")

func (e *OptionError) Error() string {
	if e.Option == "" {
		return e.Err.Error()
	}
	return e.Option + ": " + e.Err.Error()
}

func (e *OptionError) Unwrap() error { return e.Err }

// Lookup returns the kind of kinds whose Schemes hold the scheme of
// rawURL, and rawURL parsed. A text that is not a URL, or a scheme that no
// kind has, is an *OptionError for "URL" whose message lists what kinds
// offer, and shows the text through Redact.
func Lookup(kinds []URLKind, rawURL string) (URLKind, *url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		var want []string
		for _, k := range kinds {
			want = append(want, k.Schemes[0]+"://...")
		}
		return URLKind{}, nil, &OptionError{Option: "URL", Err: fmt.Errorf("%q is not a URL (want %s)", Redact(rawURL), orList(want))}
	}
	var want []string
	for _, k := range kinds {
		for _, s := range k.Schemes {
			if strings.EqualFold(s, u.Scheme) {
				return k, u, nil
			}
			want = append(want, s)
		}
	}
	return URLKind{}, nil, &OptionError{Option: "URL", Err: fmt.Errorf("unknown scheme %q (want %s)", u.Scheme, orList(want))}
}

// orList joins items as a sentence does: "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// WithCredentials returns u, or a copy of it with user and password as its
// user information when it has none and user is given: a broker's
// credentials from URLOptions. A user without a password stays one (NATS
// reads it as a token); a password without a user is ignored.
func WithCredentials(u *url.URL, user, password string) *url.URL {
	if u.User != nil || user == "" {
		return u
	}
	c := *u
	c.User = url.User(user)
	if password != "" {
		c.User = url.UserPassword(user, password)
	}
	return &c
}

// Redact returns a sink URL fit to print in a log or an error: the
// password of its user information reads xxxxx, and so does a user
// without a password (which NATS reads as a token), and the value of each
// query parameter whose name holds "password" (redact.DSN, which also
// hides a password holding an unescaped '/', '?' or '#' by its shape). Of
// a text that does not parse, or is not written as a URL (scheme://...),
// only what follows its last '@' is shown, its password keys' values
// (password=...) hidden too, in case it is a database's keyword/value
// connection string given by mistake. The host, the path and the other
// parameters are shown, to tell the URL apart: a webhook's path, which
// may hold a token, is for messages to the one who gave it (Sink.String
// leaves it out of logs).
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || !redact.IsURL(rawURL) {
		s := rawURL
		if err == nil {
			s = redact.DSN(rawURL)
		}
		if at := strings.LastIndexByte(s, '@'); at >= 0 {
			return "…@" + s[at+1:]
		}
		return s
	}
	if u.User != nil {
		if _, has := u.User.Password(); !has {
			u.User = url.User(redact.Mask)
			rawURL = u.String()
		}
	}
	return redact.DSN(rawURL)
}
