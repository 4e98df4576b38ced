package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox/store"
)

// testEndpointUpdateStale: an EndpointUpdate given the UpdatedAt read
// before another EndpointUpdate, an EndpointSeal, an EndpointSetState or
// an EndpointRotateSecret returns ErrEndpointChanged and changes nothing
// (the seal's new URL stays beside its credentials); one given the
// UpdatedAt of an endpoint since deleted returns ErrEndpointNotFound.
func testEndpointUpdateStale(t *testing.T, s store.Endpoints) {
	ctx := ctxFor(t)
	changes := []struct {
		name   string
		sealed bool // the endpoint is created sealed
		change func(t *testing.T, e store.Endpoint)
	}{
		{"Update", false, func(t *testing.T, e store.Endpoint) {
			e.Name, e.URL = "renamed", "https://example.org/renamed"
			if _, err := s.EndpointUpdate(ctx, e); err != nil {
				t.Fatal(err)
			}
		}},
		{"Seal", true, func(t *testing.T, e store.Endpoint) {
			// Partner B's credentials, with B's URL.
			sealed := store.SealedSecrets{Data: []byte("credentials of https://b.example/hook"), Key: "k2", Auth: "bearer"}
			if err := s.EndpointSeal(ctx, e.ID, sealed, time.Time{}, "https://b.example/hook", e.Sealed.Data); err != nil {
				t.Fatal(err)
			}
		}},
		{"SetState", false, func(t *testing.T, e store.Endpoint) {
			if err := s.EndpointSetState(ctx, e.ID, store.EndpointDisabled); err != nil {
				t.Fatal(err)
			}
		}},
		{"RotateSecret", false, func(t *testing.T, e store.Endpoint) {
			if err := s.EndpointRotateSecret(ctx, e.ID, "whsec_next", time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range changes {
		t.Run("After"+c.name, func(t *testing.T) {
			var read store.Endpoint
			if c.sealed {
				var err error
				read, err = s.EndpointCreate(ctx, sealedEndpoint("a-"+c.name, store.SealedSecrets{
					Data: []byte("credentials of https://example.com/a-" + c.name), Key: "k1", Auth: "bearer"}))
				if err != nil {
					t.Fatal(err)
				}
				read = getEndpoint(t, s, read.ID)
			} else {
				read = getEndpoint(t, s, newEndpoint(t, s, "a-"+c.name).ID)
			}
			c.change(t, read)
			after := getEndpoint(t, s, read.ID)
			if after.UpdatedAt.Equal(read.UpdatedAt) {
				t.Fatalf("%s left UpdatedAt at %v: want it changed", c.name, after.UpdatedAt)
			}
			// Update A read the endpoint before the change and changes only
			// its filter: it must not write back what it read.
			stale := read
			stale.Filter = `event.type == "order.created"`
			got, err := s.EndpointUpdate(ctx, stale)
			if !errors.Is(err, store.ErrEndpointChanged) {
				t.Fatalf("update from before the %s: %s, %v; want ErrEndpointChanged", c.name, describe(got), err)
			}
			unchanged(t, s, after)

			// From what it reads again, it goes through.
			again := after
			again.Filter = stale.Filter
			got, err = s.EndpointUpdate(ctx, again)
			if err != nil {
				t.Fatalf("update from after the %s: %v", c.name, err)
			}
			if got.Filter != stale.Filter || got.URL != after.URL || !slices.Equal(got.Sealed.Data, after.Sealed.Data) {
				t.Errorf("update from after the %s: %s; want the new filter, the URL and credentials of the %s",
					c.name, describe(got), c.name)
			}
			unchanged(t, s, got)
		})
	}

	gone := newEndpoint(t, s, "gone")
	if err := s.EndpointDelete(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	gone.Name = "back"
	if _, err := s.EndpointUpdate(ctx, gone); !errors.Is(err, store.ErrEndpointNotFound) {
		t.Errorf("update of a deleted endpoint from its UpdatedAt: %v, want ErrEndpointNotFound", err)
	}
}

// testEndpointUpdateCurrent: an EndpointUpdate given the UpdatedAt it
// read goes through and returns the new one, which EndpointGet reads and
// the next update takes (every update changes it, back to back); the same
// instant in another location matches, a time a fraction of a microsecond
// off does not; a zero UpdatedAt writes whatever changed in between.
func testEndpointUpdateCurrent(t *testing.T, s store.Endpoints) {
	ctx := ctxFor(t)
	e := getEndpoint(t, s, newEndpoint(t, s, "a").ID)
	for i := range 10 {
		prev := e.UpdatedAt
		e.Name = fmt.Sprintf("a%d", i)
		if i%2 == 1 {
			e.UpdatedAt = e.UpdatedAt.UTC() // the instant matters, not its location
		}
		got, err := s.EndpointUpdate(ctx, e)
		if err != nil {
			t.Fatalf("update %d from UpdatedAt %v: %v", i, prev, err)
		}
		if got.Name != e.Name || !got.UpdatedAt.After(prev) {
			t.Fatalf("update %d: name %q, UpdatedAt %v; want %q, after %v", i, got.Name, got.UpdatedAt, e.Name, prev)
		}
		unchanged(t, s, got)
		e = got
	}

	off := e
	off.Name, off.UpdatedAt = "off", e.UpdatedAt.Add(time.Nanosecond)
	if _, err := s.EndpointUpdate(ctx, off); !errors.Is(err, store.ErrEndpointChanged) {
		t.Errorf("update from UpdatedAt + 1ns: %v, want ErrEndpointChanged", err)
	}
	unchanged(t, s, e)

	// Zero: the unconditional write, over a change made in between.
	if err := s.EndpointSetState(ctx, e.ID, store.EndpointDisabled); err != nil {
		t.Fatal(err)
	}
	blind := e
	blind.Name, blind.UpdatedAt = "blind", time.Time{}
	got, err := s.EndpointUpdate(ctx, blind)
	if err != nil || got.Name != "blind" || !got.UpdatedAt.After(e.UpdatedAt) || got.State != store.EndpointDisabled {
		t.Errorf("update with a zero UpdatedAt: %s, UpdatedAt %v, state %s, %v; want written, UpdatedAt after %v, still disabled",
			describe(got), got.UpdatedAt, got.State, err, e.UpdatedAt)
	}
	unchanged(t, s, got)
}

// testEndpointUpdateRace: updaters that each add their own types to an
// endpoint, read-modify-write, again from a fresh read on
// ErrEndpointChanged, while a rotation moves the endpoint to other URLs
// with the credentials for each, lose no type, and the endpoint ends with
// the last URL beside the credentials sealed for it: no update wrote back
// a URL it read before a seal.
func testEndpointUpdateRace(t *testing.T, s store.Endpoints) {
	ctx := ctxFor(t)
	const updaters, each, seals = 6, 4, 4
	first := "https://example.com/url-0"
	e, err := s.EndpointCreate(ctx, store.Endpoint{Name: "raced", URL: first, Concurrency: 1,
		Sealed: store.SealedSecrets{Data: []byte(first), Key: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	var wg sync.WaitGroup
	for u := range updaters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range each {
				for {
					read, err := s.EndpointGet(ctx, e.ID)
					if err != nil {
						fail(err)
						return
					}
					read.Types = append(read.Types, fmt.Sprintf("u%d.n%d", u, n))
					_, err = s.EndpointUpdate(ctx, read)
					if err == nil {
						break
					}
					if !errors.Is(err, store.ErrEndpointChanged) {
						fail(fmt.Errorf("updater %d: %w", u, err))
						return
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; n <= seals; n++ {
			url := fmt.Sprintf("https://example.com/url-%d", n)
			read, err := s.EndpointGet(ctx, e.ID)
			if err != nil {
				fail(err)
				return
			}
			// Updates leave the sealed data: only another seal could fail this one.
			if err := s.EndpointSeal(ctx, e.ID, store.SealedSecrets{Data: []byte(url), Key: "k"}, time.Time{}, url, read.Sealed.Data); err != nil {
				fail(fmt.Errorf("seal %d: %w", n, err))
				return
			}
		}
	}()
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	got := getEndpoint(t, s, e.ID)
	last := fmt.Sprintf("https://example.com/url-%d", seals)
	if got.URL != last || string(got.Sealed.Data) != last {
		t.Errorf("endpoint at URL %q with the credentials of %q; want both %q", got.URL, got.Sealed.Data, last)
	}
	var want []string
	for u := range updaters {
		for n := range each {
			want = append(want, fmt.Sprintf("u%d.n%d", u, n))
		}
	}
	types := slices.Clone(got.Types)
	slices.Sort(types)
	if !slices.Equal(types, want) {
		t.Errorf("types %v; want every updater's: %v", got.Types, want)
	}
}

// testEndpointUpdatedAtAhead: an endpoint whose updated_at is ahead of the
// clock (a clock that went back, a row written by hand) still has it
// changed by every change, one microsecond past it, never back to a value
// read before: a stale update after any of them fails. One past year 9999
// or infinite, which the stores read as they can, becomes now at the next
// change.
func testEndpointUpdatedAtAhead(t *testing.T, s raw) {
	ctx := ctxFor(t)
	endpoints, ok := s.Outbox.(store.Endpoints)
	if !ok {
		t.Fatalf("%T is no store.Endpoints: a store's driver must be one", s.Outbox)
	}
	ahead := time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)
	e := newEndpoint(t, endpoints, "ahead")
	setUpdatedAt := func(value string) error {
		return s.Exec(ctx, "update {endpoints} set updated_at = "+value+" where id = '"+e.ID.String()+"'")
	}
	sqlTime := func(at time.Time) string {
		switch s.Dialect {
		case "sqlite":
			return fmt.Sprint(at.UnixMicro())
		case "mysql":
			return "'" + at.UTC().Format("2006-01-02 15:04:05.999999") + "'"
		}
		return "'" + at.Format(time.RFC3339Nano) + "'"
	}
	if err := setUpdatedAt(sqlTime(ahead)); err != nil {
		t.Fatal(err)
	}
	changes := []func(e store.Endpoint) error{
		func(e store.Endpoint) error {
			e.Name = "renamed"
			_, err := endpoints.EndpointUpdate(ctx, e)
			return err
		},
		func(e store.Endpoint) error { return endpoints.EndpointSetState(ctx, e.ID, store.EndpointDisabled) },
		func(e store.Endpoint) error {
			return endpoints.EndpointRotateSecret(ctx, e.ID, "whsec_next", time.Now().Add(time.Hour))
		},
		func(e store.Endpoint) error {
			return endpoints.EndpointSeal(ctx, e.ID, store.SealedSecrets{Data: []byte("sealed")}, time.Time{}, "", e.Sealed.Data)
		},
		func(e store.Endpoint) error { e.Name = "again"; _, err := endpoints.EndpointUpdate(ctx, e); return err },
	}
	read := getEndpoint(t, endpoints, e.ID)
	if !read.UpdatedAt.Equal(ahead) {
		t.Fatalf("UpdatedAt %v; want %v", read.UpdatedAt, ahead)
	}
	for i, change := range changes {
		if err := change(read); err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
		got := getEndpoint(t, endpoints, e.ID)
		if want := read.UpdatedAt.Add(time.Microsecond); !got.UpdatedAt.Equal(want) {
			t.Errorf("change %d: UpdatedAt %v; want %v, a microsecond past the one it had", i, got.UpdatedAt, want)
		}
		stale := read
		stale.Filter = "true"
		if _, err := endpoints.EndpointUpdate(ctx, stale); !errors.Is(err, store.ErrEndpointChanged) {
			t.Errorf("update from before change %d: %v; want ErrEndpointChanged", i, err)
		}
		read = got
	}

	past := map[string][]string{
		"postgres": {"'infinity'", "'20000-01-01 00:00:00+00'"},
		"sqlite":   {"253402300800000000", "9223372036854775807"},
		"mysql":    {"'9999-12-31 23:59:59.999999'"},
	}[s.Dialect]
	for _, value := range past {
		if err := setUpdatedAt(value); err != nil {
			continue // the schema refuses it: fine
		}
		read := getEndpoint(t, endpoints, e.ID)
		read.Name = "healed"
		got, err := endpoints.EndpointUpdate(ctx, read)
		if err != nil || got.UpdatedAt.IsZero() || !got.UpdatedAt.Before(ahead) {
			t.Errorf("update of an endpoint updated at %s (read as %v): UpdatedAt %v, %v; want now", value, read.UpdatedAt, got.UpdatedAt, err)
		}
		unchanged(t, endpoints, got)
	}
}
