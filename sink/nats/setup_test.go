package nats_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/sink/nats"
)

// setupConfig is the sink Config of url for a new subject prefix, with the
// stream Setup will name, deleted when the test ends.
func setupConfig(t *testing.T, query string) (nats.Config, string, jetstream.JetStream) {
	t.Helper()
	prefix := strings.ToLower(natstest.Name("setup"))
	cfg, err := nats.ParseURL(natstest.URL() + "?" + strings.ReplaceAll(query, "PREFIX", prefix))
	if err != nil {
		t.Fatal(err)
	}
	_, js := natstest.Connect(t, natstest.URL())
	name := strings.ToUpper(prefix)
	if cfg.Stream != "" {
		name = cfg.Stream
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return cfg, prefix, js
}

// A dry run creates nothing; Setup creates a file stream capturing the template's subjects with the
// default duplicate window; a second Setup finds it and changes nothing,
// and the sink then starts on it.
func TestSetupCreatesTheStreamOnce(t *testing.T) {
	cfg, prefix, js := setupConfig(t, "subject=PREFIX.{aggregate_type}.{event_type}")
	dry, err := nats.Setup(t.Context(), cfg, nats.SetupConfig{DryRun: true})
	if err != nil || !dry.Created {
		t.Fatalf("dry run = %+v, %v; want the stream to create", dry, err)
	}
	if _, err := js.Stream(t.Context(), strings.ToUpper(prefix)); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("after a dry run, the stream: %v, want not found", err)
	}
	step, err := nats.Setup(t.Context(), cfg, nats.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.ToUpper(prefix)
	if !step.Created || step.Resource != "stream "+name {
		t.Errorf("first Setup = %+v, want stream %s created", step, name)
	}
	st, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	got := st.CachedInfo().Config
	if len(got.Subjects) != 1 || got.Subjects[0] != prefix+".>" || got.Storage != jetstream.FileStorage || got.Duplicates != nats.DuplicateWindowDefault {
		t.Errorf("stream config: subjects %v, storage %v, duplicates %v; want [%s.>], file, %v", got.Subjects, got.Storage, got.Duplicates, prefix, nats.DuplicateWindowDefault)
	}
	again, err := nats.Setup(t.Context(), cfg, nats.SetupConfig{})
	if err != nil || again.Created {
		t.Errorf("second Setup = %+v, %v; want the stream found, not created", again, err)
	}
	s, err := nats.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New after Setup: %v", err)
	}
	s.Close()
}

// A stream that exists with a shorter duplicate window, or a stream named
// in the URL that does not capture the subjects, is reported and left as
// it was.
func TestSetupReportsAStreamThatDiffers(t *testing.T) {
	cfg, prefix, js := setupConfig(t, "subject=PREFIX.paid")
	name := strings.ToUpper(prefix)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: name, Subjects: []string{prefix + ".paid"}, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
	}); err != nil {
		t.Fatal(err)
	}
	_, err := nats.Setup(t.Context(), cfg, nats.SetupConfig{})
	if !errors.Is(err, nats.ErrDiffers) || !strings.Contains(err.Error(), "duplicate window 2m0s") {
		t.Fatalf("Setup on a stream with a 2m window: %v, want ErrDiffers naming the window", err)
	}
	st, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if d := st.CachedInfo().Config.Duplicates; d != 2*time.Minute {
		t.Errorf("the stream's window became %v; Setup must not change it", d)
	}
	if _, err := nats.Setup(t.Context(), cfg, nats.SetupConfig{DuplicateWindow: time.Minute}); err != nil {
		t.Errorf("Setup asking for a 1m window on the 2m stream: %v", err)
	}
	other, _, _ := setupConfig(t, "subject=PREFIX.paid&stream="+name)
	if _, err := nats.Setup(t.Context(), other, nats.SetupConfig{}); !errors.Is(err, nats.ErrDiffers) {
		t.Errorf("Setup of stream %s for subjects it does not capture: %v, want ErrDiffers", name, err)
	}
}

// A template whose first token is a placeholder would need a stream of
// every subject: Setup refuses it and says why.
func TestSetupRefusesAPlaceholderFirst(t *testing.T) {
	cfg, err := nats.ParseURL(natstest.URL() + "?subject={event_type}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nats.Setup(t.Context(), cfg, nats.SetupConfig{}); err == nil || !strings.Contains(err.Error(), "begins with a placeholder") {
		t.Errorf("Setup: %v, want a refusal naming the placeholder", err)
	}
}
