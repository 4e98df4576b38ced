package nats

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DuplicateWindowDefault is the duplicate window of a stream Setup
// creates. Nats-Msg-Id de-duplication only absorbs a retry that comes
// within it, so it covers the longest a relay with its default settings
// can take to publish an event again after a publish whose PubAck was
// lost: the longest backoff (10m), or a lease that expires after a crash
// (30s), plus one publish timeout (10s); rounded up to 11 minutes.
const DuplicateWindowDefault = 11 * time.Minute

// SetupConfig says what Setup creates besides what the sink's Config
// names.
type SetupConfig struct {
	// DuplicateWindow is the stream's duplicate window. Default
	// DuplicateWindowDefault. An existing stream with a shorter window is
	// reported as differing.
	DuplicateWindow time.Duration
	// Replicas is the stream's number of replicas (1 for a single server).
	// Default 1.
	Replicas int
	// DryRun changes nothing: Setup only reports what it would do (a step
	// Created is one it would create).
	DryRun bool
}

// SetupStep is what Setup did with one resource.
type SetupStep struct {
	// Resource names it: "stream ORDERS".
	Resource string
	// Created is false when it existed already (and was left unchanged).
	Created bool
	// Settings describes the settings that matter to the relay.
	Settings string
}

// ErrDiffers is wrapped by Setup's error when a resource exists with
// settings that differ from those asked; Setup changes nothing then.
var ErrDiffers = errors.New("exists with different settings; not changed")

// Setup makes sure a JetStream stream captures the subjects of c.Subject,
// as New checks: a stream that stores to file, captures the fixed subject
// or the subjects beginning with the template's text before its first
// placeholder ("orders.{event_type}" gives "orders.>"), with the duplicate
// window s asks. The stream is c.Stream, or else the one that captures the
// subjects already, or else one named after the subjects' first token in
// upper case (ORDERS). Run again, it finds the stream and changes nothing;
// a stream that differs (not capturing the subjects, a shorter duplicate
// window, memory storage) is reported in an error wrapping ErrDiffers.
func Setup(ctx context.Context, c Config, s SetupConfig) (SetupStep, error) {
	if err := c.validate(); err != nil {
		return SetupStep{}, err
	}
	c = c.withDefaults()
	if s.DuplicateWindow < 0 || s.Replicas < 0 {
		return SetupStep{}, errors.New("nats: SetupConfig.DuplicateWindow and Replicas may not be negative")
	}
	if s.DuplicateWindow == 0 {
		s.DuplicateWindow = DuplicateWindowDefault
	}
	s.Replicas = max(s.Replicas, 1)
	filter := c.Subject.String()
	if !c.Subject.IsFixed() {
		if filter = fixedPrefix(filter); filter == "" {
			return SetupStep{}, fmt.Errorf("nats: subject template %s begins with a placeholder: a stream would have to capture every subject; begin it with a fixed token, such as orders.{event_type}", c.Subject)
		}
	}
	nc, js, err := connectSetup(c)
	if err != nil {
		return SetupStep{}, err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	name, err := streamOf(ctx, js, c.Stream, filter)
	if err != nil {
		return SetupStep{}, err
	}
	want := jetstream.StreamConfig{
		Name: name, Subjects: []string{filter}, Storage: jetstream.FileStorage,
		Duplicates: s.DuplicateWindow, Replicas: s.Replicas,
	}
	st, err := js.Stream(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if !s.DryRun {
			if _, err := js.CreateStream(ctx, want); err != nil {
				return SetupStep{}, fmt.Errorf("nats: create stream %s: %w", name, err)
			}
		}
		return SetupStep{Resource: "stream " + name, Created: true, Settings: describeStream(want)}, nil
	case err != nil:
		return SetupStep{}, fmt.Errorf("nats: reading stream %s: %w", name, err)
	}
	have := st.CachedInfo().Config
	if problems := streamDiffers(have, want, filter); len(problems) > 0 {
		return SetupStep{}, fmt.Errorf("nats: stream %s %w: %s", name, ErrDiffers, strings.Join(problems, "; "))
	}
	return SetupStep{Resource: "stream " + name, Settings: describeStream(have)}, nil
}

// connectSetup connects as New does, without reconnecting.
func connectSetup(c Config) (*natsgo.Conn, jetstream.JetStream, error) {
	opts := []natsgo.Option{natsgo.Name("postbox sink setup"), natsgo.Timeout(c.Timeout)}
	switch {
	case c.Token != "":
		opts = append(opts, natsgo.Token(c.Token))
	case c.User != "":
		opts = append(opts, natsgo.UserInfo(c.User, c.Password))
	}
	nc, err := natsgo.Connect(strings.Join(c.Servers, ","), opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("nats: connect to %s: %w", (&Sink{cfg: c}).servers(), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	return nc, js, nil
}

// streamOf names the stream of filter: named, the stream capturing filter,
// or a new name from filter's first token. A named stream that another
// stream's subjects shadow is an error.
func streamOf(ctx context.Context, js jetstream.JetStream, named, filter string) (string, error) {
	found, err := js.StreamNameBySubject(ctx, filter)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		found = ""
	case err != nil:
		return "", fmt.Errorf("nats: looking for the stream of subject %s: %w", filter, err)
	}
	switch {
	case named != "" && found != "" && found != named:
		return "", fmt.Errorf("nats: stream %s %w: subjects %s are captured by stream %s, not by %s (the URL parameter stream=)", named, ErrDiffers, filter, found, named)
	case named != "":
		return named, nil
	case found != "":
		return found, nil
	}
	first, _, _ := strings.Cut(filter, ".")
	return strings.ToUpper(first), nil
}

// streamDiffers lists how have falls short of want for a relay publishing
// to filter.
func streamDiffers(have, want jetstream.StreamConfig, filter string) []string {
	var problems []string
	if !captures(have.Subjects, filter) {
		problems = append(problems, fmt.Sprintf("its subjects %s do not capture %s", strings.Join(have.Subjects, ","), filter))
	}
	if have.Duplicates < want.Duplicates {
		problems = append(problems, fmt.Sprintf("duplicate window %s, shorter than the %s asked (a retry after it would be stored twice)", have.Duplicates, want.Duplicates))
	}
	if have.Storage != jetstream.FileStorage {
		problems = append(problems, "memory storage, not file (a restart of the server loses its messages)")
	}
	return problems
}

// captures reports whether one of subjects is filter itself (a stream
// Setup made) or a wider filter that contains it ("orders.>" contains
// "orders.paid" and "orders.eu.>").
func captures(subjects []string, filter string) bool {
	for _, s := range subjects {
		if s == filter || subsetOf(strings.Split(filter, "."), strings.Split(s, ".")) {
			return true
		}
	}
	return false
}

// subsetOf reports whether every subject the tokens of filter match is
// matched by the tokens of wide.
func subsetOf(filter, wide []string) bool {
	for i, w := range wide {
		switch {
		case w == ">":
			return i < len(filter)
		case i >= len(filter) || filter[i] == ">":
			return false
		case w != "*" && w != filter[i]:
			return false
		}
	}
	return len(filter) == len(wide)
}

// describeStream names the settings Setup chose or found.
func describeStream(c jetstream.StreamConfig) string {
	return fmt.Sprintf("subjects %s, %s storage, duplicate window %s, %d replica(s), retention %s",
		strings.Join(c.Subjects, ","), c.Storage, c.Duplicates, max(c.Replicas, 1), c.Retention)
}
