package inbox_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/signature"
)

// replayScheme is a signature scheme and key kind the replay tests run on,
// with the secret that signs and the one the handler verifies with.
type replayScheme struct {
	name           string
	scheme         signature.Scheme
	signer, verify string
}

// replaySchemes are every scheme postbox signs with: Standard v1 (HMAC),
// Standard v1a (ed25519) and the article's X-Signature.
var replaySchemes = []replayScheme{
	{"standard v1", signature.Standard, standardSecret, standardSecret},
	{"standard v1a", signature.Standard, v1aSecretKey, v1aPublicKey},
	{"x-signature", signature.XSignature, xSecret, xSecret},
}

// The ed25519 pair of the v1a replay tests (Svix's test key).
const (
	v1aSecretKey = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg=="
	v1aPublicKey = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4="
)

// warehouse is the warehouse consumer behind the webhook handler:
// a router that reserves stock for "order.created" and ignores every other
// type (recorded done), recording what it applied.
type warehouse struct {
	*fixture
	applied string // quoted table of applied events
}

func newWarehouse(t *testing.T, k replayScheme, policy inbox.MetadataPolicy) *warehouse {
	t.Helper()
	w := &warehouse{}
	r := inbox.NewRouter[pgx.Tx]()
	r.SetUnknown(inbox.UnknownIgnore)
	inbox.Handle(r, "order.created", func(ctx context.Context, tx pgx.Tx, ev *inbox.Event, _ struct{}) error {
		_, err := tx.Exec(ctx, "insert into "+w.applied+" values ($1, $2, $3, $4, $5)", ev.ID, ev.EventType, ev.AggregateType, ev.AggregateID, ev.Seq)
		return err
	})
	var ib *inbox.Inbox[pgx.Tx]
	w.fixture = newFixture(t, inbox.HandlerConfig{
		Scheme:   k.scheme,
		Secrets:  []string{k.verify},
		Metadata: policy,
		Process: func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
			return ib.Process(ctx, ev, r.Apply)
		},
	})
	ib = w.ib
	var err error
	if w.signer, err = signature.NewSigner(k.scheme, k.signer); err != nil {
		t.Fatal(err)
	}
	w.applied = pgx.Identifier{w.store.Schema(), "applied"}.Sanitize()
	if _, err := w.store.Pool().Exec(context.Background(),
		"create table "+w.applied+" (event_id uuid, event_type text, aggregate_type text, aggregate_id text, seq bigint)"); err != nil {
		t.Fatal(err)
	}
	return w
}

// delivery is a captured webhook request: it can be sent again, as it was
// or changed.
type delivery struct {
	header http.Header
	body   []byte
}

// capture signs a delivery of event id for aggregate order/aggregateID
// with the given sequence ("" for none), as the relay would send it.
func (w *warehouse) capture(id uuid.UUID, aggregateID, seq string) delivery {
	w.t.Helper()
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(inbox.HeaderEventType, "order.created")
	h.Set(inbox.HeaderAggregateType, "order")
	h.Set(inbox.HeaderAggregateID, aggregateID)
	if seq != "" {
		h.Set(inbox.HeaderSequence, seq)
	}
	body := payload(id)
	if err := w.signer.Sign(h, id.String(), time.Now(), body); err != nil {
		w.t.Fatal(err)
	}
	return delivery{header: h, body: body}
}

// forged returns a copy of d changed by forge.
func (d delivery) forged(forge func(h http.Header)) delivery {
	h := d.header.Clone()
	forge(h)
	return delivery{header: h, body: d.body}
}

// send posts d and returns the answer's status code and body.
func (w *warehouse) send(d delivery) (int, string) {
	w.t.Helper()
	req, err := http.NewRequest(http.MethodPost, w.srv.URL, bytes.NewReader(d.body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header = d.header.Clone()
	return w.fixture.send(req)
}

// appliedRows returns what the warehouse applied for event id, one line
// per application: "type aggregate_type/aggregate_id #seq".
func (w *warehouse) appliedRows(id uuid.UUID) []string {
	w.t.Helper()
	rows, err := w.store.Pool().Query(context.Background(), "select event_type, aggregate_type, aggregate_id, seq from "+w.applied+" where event_id = $1", id)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var eventType, aggregateType, aggregateID string
		var seq int64
		if err := rows.Scan(&eventType, &aggregateType, &aggregateID, &seq); err != nil {
			w.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s/%s #%d", eventType, aggregateType, aggregateID, seq))
	}
	if err := rows.Err(); err != nil {
		w.t.Fatal(err)
	}
	return out
}

// inboxRows counts the inbox rows of event id.
func (w *warehouse) inboxRows(id uuid.UUID) int {
	w.t.Helper()
	var n int
	if err := w.store.Pool().QueryRow(context.Background(), "select count(*) from "+w.inbox+" where id = $1", id).Scan(&n); err != nil {
		w.t.Fatal(err)
	}
	return n
}

func setHeader(name, value string) func(http.Header) {
	return func(h http.Header) { h.Set(name, value) }
}

func delHeader(names ...string) func(http.Header) {
	return func(h http.Header) {
		for _, name := range names {
			h.Del(name)
		}
	}
}

// The warehouse attack: a captured delivery is sent first with a
// metadata header changed (an ignored event type, another aggregate, another
// or no sequence number, the metadata signature removed), then the genuine
// one. The forged delivery is refused and stores nothing; the genuine one
// is applied as signed, and its aggregate goes on in order. On every scheme.
func TestForgedMetadataCannotChangeWhatIsApplied(t *testing.T) {
	t.Parallel()
	forgeries := []struct {
		name  string
		forge func(http.Header)
	}{
		{"event type changed to an ignored one", setHeader(inbox.HeaderEventType, "order.ignored")},
		{"event type removed", delHeader(inbox.HeaderEventType)},
		{"aggregate type changed", setHeader(inbox.HeaderAggregateType, "invoice")},
		{"aggregate id changed", setHeader(inbox.HeaderAggregateID, "another-order")},
		{"sequence changed", setHeader(inbox.HeaderSequence, "2")},
		{"sequence huge", setHeader(inbox.HeaderSequence, "9223372036854775807")},
		{"sequence removed", delHeader(inbox.HeaderSequence)},
		{"metadata signature removed", delHeader(signature.HeaderMetadataSignature)},
		{"metadata signature removed, event type changed", func(h http.Header) {
			h.Del(signature.HeaderMetadataSignature)
			h.Set(inbox.HeaderEventType, "order.ignored")
		}},
		{"metadata signature of another event", nil}, // filled in below
	}
	for _, k := range replaySchemes {
		t.Run(k.name, func(t *testing.T) {
			w := newWarehouse(t, k, inbox.MetadataSigned)
			for i, f := range forgeries {
				t.Run(f.name, func(t *testing.T) {
					w.t = t
					aggregate := fmt.Sprintf("order-%d", i)
					first, second := postbox.NewID(), postbox.NewID()
					genuine := w.capture(first, aggregate, "1")
					forge := f.forge
					if forge == nil {
						other := w.capture(postbox.NewID(), aggregate, "1")
						forge = setHeader(signature.HeaderMetadataSignature, other.header.Get(signature.HeaderMetadataSignature))
					}

					if code, body := w.send(genuine.forged(forge)); code != http.StatusBadRequest && code != http.StatusUnauthorized {
						t.Fatalf("forged delivery answered %d %s, want 400 or 401", code, body)
					}
					if n, applied := w.inboxRows(first), w.appliedRows(first); n != 0 || len(applied) != 0 {
						t.Fatalf("forged delivery stored %d inbox rows and applied %q", n, applied)
					}
					if code, body := w.send(genuine); code != http.StatusOK || body != `{"status":"processed"}`+"\n" {
						t.Fatalf("genuine delivery after the forged one answered %d %s, want 200 processed", code, body)
					}
					if got, want := w.appliedRows(first), fmt.Sprintf("order.created order/%s #1", aggregate); len(got) != 1 || got[0] != want {
						t.Fatalf("applied %q, want [%q]", got, want)
					}
					if code, body := w.send(w.capture(second, aggregate, "2")); code != http.StatusOK {
						t.Fatalf("the aggregate's next event answered %d %s", code, body)
					}
				})
			}
		})
	}
}

// MetadataUnsigned, for senders that cannot sign metadata: the headers of
// a request without a metadata signature are taken as they came, and a
// request with one is still checked.
func TestMetadataUnsignedTrustsHeadersWithoutSignature(t *testing.T) {
	t.Parallel()
	w := newWarehouse(t, replaySchemes[0], inbox.MetadataUnsigned)
	id := postbox.NewID()
	unsigned := w.capture(id, "7", "1").forged(delHeader(inbox.HeaderMetadataSignature))
	if code, body := w.send(unsigned); code != http.StatusOK {
		t.Fatalf("unsigned metadata: %d %s, want 200", code, body)
	}
	if got, want := w.appliedRows(id), "order.created order/7 #1"; len(got) != 1 || got[0] != want {
		t.Fatalf("applied %q, want [%q]", got, want)
	}
	forged := w.capture(postbox.NewID(), "8", "").forged(setHeader(inbox.HeaderEventType, "order.ignored"))
	if code, body := w.send(forged); code != http.StatusUnauthorized {
		t.Fatalf("metadata that does not match its signature: %d %s, want 401", code, body)
	}
}

// MetadataIgnored reads no Postbox-* header: Process gets empty metadata
// and sets it from the signed payload.
func TestMetadataIgnoredLeavesMetadataToProcess(t *testing.T) {
	t.Parallel()
	var got inbox.Event
	f := newFixture(t, inbox.HandlerConfig{
		Metadata: inbox.MetadataIgnored,
		Process: func(_ context.Context, ev *inbox.Event) (inbox.Outcome, error) {
			got = *ev
			return inbox.Processed, nil
		},
	})
	id := postbox.NewID()
	req := f.request(id.String(), payload(id), time.Now(), inbox.HeaderSequence, "3")
	req.Header.Del(inbox.HeaderMetadataSignature)
	req.Header.Set(inbox.HeaderEventType, "order.ignored")
	f.wantAnswer(req, http.StatusOK, "processed")
	if got.ID != id || got.EventType != "" || got.AggregateType != "" || got.AggregateID != "" || got.Seq != 0 {
		t.Fatalf("Process got %+v, want the id and no metadata", got)
	}
}

func TestNewHandlerRefusesUnknownMetadataPolicy(t *testing.T) {
	_, err := inbox.NewHandler(inbox.HandlerConfig{
		Secrets:  []string{standardSecret},
		Metadata: inbox.MetadataPolicy(7),
		Process:  func(context.Context, *inbox.Event) (inbox.Outcome, error) { return inbox.Processed, nil },
	})
	if err == nil || err.Error() != "inbox: HandlerConfig.Metadata MetadataPolicy(7) is not a policy" {
		t.Fatalf("got %v", err)
	}
}

// The headers the signature package signs are the wire format's, which the
// relay's sinks send and the handler reads.
func TestMetadataSignatureCoversTheWireHeaders(t *testing.T) {
	for _, names := range [][2]string{
		{signature.HeaderEventType, inbox.HeaderEventType},
		{signature.HeaderAggregateType, inbox.HeaderAggregateType},
		{signature.HeaderAggregateID, inbox.HeaderAggregateID},
		{signature.HeaderSequence, inbox.HeaderSequence},
	} {
		if names[0] != names[1] || http.CanonicalHeaderKey(names[0]) != names[0] {
			t.Errorf("signature signs %q, the wire format sends %q", names[0], names[1])
		}
	}
}
