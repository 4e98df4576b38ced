package storetest

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// The property test's length: POSTBOX_PROPERTY_ROUNDS rounds (default
// propertyRounds, a few seconds), from the seed POSTBOX_PROPERTY_SEED
// (default: the time; the test logs it, to replay a failure). A longer
// run:
//
//	POSTBOX_PROPERTY_ROUNDS=200 go test -run 'Hostile/Property' ./store/postgres/ ./store/sqlite/
const propertyRounds = 2

// propertyRow is what the property test wrote and expects of one row.
type propertyRow struct {
	edge    Edge // zero for a healthy row
	typ     string
	agg     string
	payload string
	claimed int
	invalid string
	done    bool
}

// testPropertyHostileColumns writes, round after round, every edge value
// of every column (in a random order, beside random healthy rows), as
// plain SQL, first with the schema's bounds and then without them, and
// drains the outbox as a relay does: claim (random limits, byte bounds,
// ordered or not), settle done what is valid and failed (with the Invalid
// text) what is not, until nothing is left. It asserts that no claim and
// no read ever fails, that every healthy row is claimed once, valid, as
// written, and that every hostile row is refused at insert, delivered as
// written when its value is one an event may have, or ends failed with an
// error naming its column.
func testPropertyHostileColumns(t *testing.T, s raw) {
	rounds := envInt(t, "POSTBOX_PROPERTY_ROUNDS", propertyRounds)
	seed := int64(envInt(t, "POSTBOX_PROPERTY_SEED", int(time.Now().UnixNano())))
	t.Logf("seed %d (POSTBOX_PROPERTY_SEED), %d rounds (POSTBOX_PROPERTY_ROUNDS)", seed, rounds)
	rng := rand.New(rand.NewSource(seed))
	for round := range 2 * rounds {
		ctx := ctxFor(t) // a deadline per round, however many rounds
		if round == rounds {
			s.Loosen(t)
		}
		rows := map[uuid.UUID]*propertyRow{}
		edges := Edges(s.Dialect)
		rng.Shuffle(len(edges), func(i, j int) { edges[i], edges[j] = edges[j], edges[i] })
		for i, e := range edges {
			for range rng.Intn(3) {
				writeHealthy(t, ctx, s, rng, rows)
			}
			e.SQL = strings.ReplaceAll(e.SQL, "{n}", fmt.Sprint(i))
			if e.Column == "dedup_key" && e.SQL != "null" {
				if s.Dialect == "mysql" { // || is OR there
					e.SQL = fmt.Sprintf("concat(%s, '-%d-%d')", e.SQL, round, i)
				} else {
					e.SQL = fmt.Sprintf("%s || '-%d-%d'", e.SQL, round, i)
				}
			}
			id, err := insertRow(ctx, s, e, "")
			if err != nil {
				if e.Outcome == Delivered && !e.Bounded {
					t.Fatalf("%s = %.40s: insert: %v", e.Column, e.SQL, err)
				}
				continue
			}
			if e.Bounded && round < rounds {
				t.Fatalf("%s = %.40s: inserted, want refused by the schema's bounds", e.Column, e.SQL)
			}
			rows[id] = &propertyRow{edge: e}
		}
		readsWork(t, s)
		drain(t, ctx, s, rng, rows)
		for id, r := range rows {
			checkRow(t, ctx, s, id, r)
		}
	}
}

// writeHealthy writes a healthy row with random values as plain SQL.
func writeHealthy(t *testing.T, ctx context.Context, s raw, rng *rand.Rand, rows map[uuid.UUID]*propertyRow) {
	t.Helper()
	r := &propertyRow{
		typ:     fmt.Sprintf("order.%d", rng.Intn(5)),
		agg:     fmt.Sprint(rng.Intn(10)),
		payload: fmt.Sprintf(`{"n": %d}`, rng.Int63()),
	}
	id := uuid.Must(uuid.NewV7())
	err := s.Exec(ctx, fmt.Sprintf(`insert into {outbox_events} (id, aggregate_type, aggregate_id, event_type, payload) values ('%s', 'order', '%s', '%s', '%s')`,
		id, r.agg, r.typ, r.payload))
	if err != nil {
		t.Fatalf("insert a healthy row: %v", err)
	}
	rows[id] = r
}

// drain claims and settles as a relay does until a claim finds nothing.
func drain(t *testing.T, ctx context.Context, s raw, rng *rand.Rand, rows map[uuid.UUID]*propertyRow) {
	t.Helper()
	for range 10_000 {
		p := store.ClaimParams{Owner: "relay-p", Limit: 1 + rng.Intn(20), Lease: lease, Ordered: rng.Intn(2) == 0}
		if p.Ordered {
			p.AggregateRun = rng.Intn(4)
		}
		if rng.Intn(2) == 0 {
			p.MaxBytes = int64(1 + rng.Intn(300))
		}
		got, err := s.Claim(ctx, p)
		if err != nil {
			t.Fatalf("claim %+v: %v", p, err)
		}
		if len(got) == 0 && !p.Ordered {
			return
		}
		settleAll(t, s, rng, got, rows)
		if rng.Intn(4) == 0 {
			if _, err := purgeDone(ctx, s, time.Now().Add(time.Hour), 1+rng.Intn(10)); err != nil {
				t.Fatalf("purge done: %v", err)
			}
		}
		readsWork(t, s)
	}
	t.Fatal("the outbox did not drain")
}

// settleAll settles a claim as a relay does: done when valid (deleted or
// kept, its dedup key held or not), failed with the Invalid text
// otherwise.
func settleAll(t *testing.T, s raw, rng *rand.Rand, got []store.ClaimedEvent, rows map[uuid.UUID]*propertyRow) {
	t.Helper()
	p := store.SettleParams{Owner: "relay-p", KeepDone: rng.Intn(2) == 0, DedupWindow: time.Duration(rng.Intn(2)) * time.Hour}
	for _, d := range got {
		if r := rows[d.ID]; r != nil {
			r.claimed++
			r.invalid = d.Invalid
			if r.edge.Column == "" && (d.Invalid != "" || d.EventType != r.typ || d.AggregateID != r.agg || d.AggregateType != "order" || string(d.Payload) != r.payload) {
				t.Errorf("healthy row %s claimed as %q %q/%q %s (Invalid %q), want %q order/%q %s", d.ID, d.EventType, d.AggregateType, d.AggregateID, d.Payload, d.Invalid, r.typ, r.agg, r.payload)
			}
		}
		if d.Invalid != "" {
			p.Failed = append(p.Failed, store.Failure{ID: d.ID, LastError: d.Invalid, Lease: d.Lease})
		} else {
			p.Done = append(p.Done, d.ID)
		}
		p.Ended = append(p.Ended, d.Lease)
	}
	if len(got) > 0 {
		settle(t, s, p)
	}
}

// checkRow asserts how one written row ended.
func checkRow(t *testing.T, ctx context.Context, s raw, id uuid.UUID, r *propertyRow) {
	t.Helper()
	e := r.edge
	rec, err := s.Get(ctx, id)
	switch {
	case e.Outcome == NeverDue:
		if r.claimed != 0 || err != nil || rec.Status != store.StatusPending {
			t.Errorf("%s = %.40s: claimed %d times, status %q (%v), want never claimed", e.Column, e.SQL, r.claimed, rec.Status, err)
		}
		if err := s.Exec(ctx, fmt.Sprintf("delete from {outbox_events} where id = '%s'", id)); err != nil {
			t.Fatal(err)
		}
	case r.claimed != 1:
		t.Errorf("row %s (%s = %.40s) claimed %d times, want once", id, e.Column, e.SQL, r.claimed)
	case e.Outcome == Invalid:
		if err != nil || rec.Status != store.StatusFailed || !strings.Contains(rec.LastError, e.Column+": ") || !strings.Contains(r.invalid, e.Column+": ") {
			t.Errorf("%s = %.40s: ended %q with %q (Invalid %q, %v), want failed naming the column", e.Column, e.SQL, rec.Status, rec.LastError, r.invalid, err)
		}
	case r.invalid != "":
		t.Errorf("%s = %.40s: claimed Invalid %q, want delivered", e.Column, e.SQL, r.invalid)
	}
}

// envInt is the integer of the environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}
