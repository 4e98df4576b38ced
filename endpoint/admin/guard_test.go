package admin_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/kafka"
	"github.com/postbox-go/postbox/sink/nats"
	"github.com/postbox-go/postbox/store"
)

// Without Config.PrivateEndpoints, allow_private is refused on Check,
// Create and Update (on an endpoint that does not have it); an endpoint
// that has it (the operator gave it) keeps it through other changes.
func TestPrivateEndpointsRefusesAllowPrivate(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		k := newKeyring(t)
		operator := newAdmin(t, s, func(c *admin.Config) { c.Keyring = k })
		console := newAdmin(t, s, func(c *admin.Config) { c.Keyring, c.PrivateEndpoints = k, false })
		private := admin.Settings{Name: "internal", URL: "https://10.0.0.5/hook", AllowPrivate: true}
		if _, err := console.Check(ctx, private, endpoint.Credentials{}); fieldError(t, err).Setting != admin.SettingAllowPrivate {
			t.Errorf("Check with allow_private: %v, want allow_private refused", err)
		}
		if _, err := console.Create(ctx, private, endpoint.Credentials{}); fieldError(t, err).Setting != admin.SettingAllowPrivate {
			t.Errorf("Create with allow_private: %v, want allow_private refused", err)
		}
		if all := rows(t, s); len(all) != 0 {
			t.Fatalf("%d endpoints written after the refusals", len(all))
		}
		public, err := console.Create(ctx, admin.Settings{Name: "public", URL: publicURL}, endpoint.Credentials{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := console.Update(ctx, public.Endpoint.ID, admin.Change{AllowPrivate: ptr(true)}); fieldError(t, err).Setting != admin.SettingAllowPrivate {
			t.Errorf("Update to allow_private: %v, want allow_private refused", err)
		}
		if _, err := console.CheckChange(ctx, public.Endpoint.ID, admin.Change{AllowPrivate: ptr(true)}); fieldError(t, err).Setting != admin.SettingAllowPrivate {
			t.Errorf("CheckChange to allow_private: %v, want allow_private refused", err)
		}
		given, err := operator.Create(ctx, private, endpoint.Credentials{})
		if err != nil {
			t.Fatalf("Create with allow_private by the operator's Admin: %v", err)
		}
		if _, err := console.Update(ctx, given.Endpoint.ID, admin.Change{AllowPrivate: ptr(true), Filter: ptr("true")}); err != nil {
			t.Errorf("Update of an endpoint that has allow_private, given it again: %v", err)
		}
		for _, e := range rows(t, s) {
			if e.AllowPrivate != (e.ID == given.Endpoint.ID) {
				t.Errorf("endpoint %s: AllowPrivate %v", e.Name, e.AllowPrivate)
			}
		}
	})
}

// With Config.CheckBrokerHosts, a broker's URL gets the SSRF check too:
// every host of a Kafka or NATS host list. Without it (the command
// line's), a broker's address is not checked. Config.AllowCIDRs lets
// endpoints reach a prefix, as the relay's --allow-cidr.
func TestCheckBrokerHostsAndAllowCIDRs(t *testing.T) {
	ctx := context.Background()
	kinds := []sink.URLKind{nats.URL, kafka.URL}
	checked := newAdmin(t, sqliteStore(t), func(c *admin.Config) { c.Kinds, c.CheckBrokerHosts = kinds, true })
	unchecked := newAdmin(t, sqliteStore(t), func(c *admin.Config) { c.Kinds = kinds })
	for _, u := range []string{
		"nats://10.0.0.5:6379?subject=x",
		"nats://127.0.0.1:4222?subject=x",
		"nats://93.184.215.14:4222,localhost:4222?subject=x",
		"kafka://93.184.215.14:9092,169.254.169.254:80?topic=t",
		"kafka://93.184.215.14:9092,10.1.2.3:9092?topic=t",
	} {
		_, err := checked.Check(ctx, admin.Settings{URL: u}, endpoint.Credentials{})
		if fe := fieldError(t, err); fe.Setting != admin.SettingURL || !strings.Contains(fe.Message, "allow_private") {
			t.Errorf("%s with CheckBrokerHosts: %v, want the url refused, naming allow_private", u, err)
		}
		if _, err := checked.Check(ctx, admin.Settings{URL: u, AllowPrivate: true}, endpoint.Credentials{}); err != nil {
			t.Errorf("%s with CheckBrokerHosts and allow_private: %v", u, err)
		}
		if _, err := unchecked.Check(ctx, admin.Settings{URL: u}, endpoint.Credentials{}); err != nil {
			t.Errorf("%s without CheckBrokerHosts: %v", u, err)
		}
	}
	for _, u := range []string{"nats://93.184.215.14:4222,93.184.215.15:4222?subject=x", "kafka://93.184.215.14:9092?topic=t"} {
		if _, err := checked.Check(ctx, admin.Settings{URL: u}, endpoint.Credentials{}); err != nil {
			t.Errorf("%s (public) with CheckBrokerHosts: %v", u, err)
		}
	}
	if _, err := checked.Check(ctx, admin.Settings{URL: "nats://0.0.0.0:4222?subject=x", AllowPrivate: true}, endpoint.Credentials{}); fieldError(t, err).Setting != admin.SettingURL {
		t.Errorf("nats://0.0.0.0 with allow_private: %v, want refused", err)
	}

	internal := admin.Settings{URL: "https://10.20.0.7/hook"}
	if _, err := checked.Check(ctx, internal, endpoint.Credentials{}); fieldError(t, err).Setting != admin.SettingURL {
		t.Errorf("%s without AllowCIDRs: %v, want refused", internal.URL, err)
	}
	allowing := newAdmin(t, sqliteStore(t), func(c *admin.Config) {
		c.Kinds, c.CheckBrokerHosts, c.AllowCIDRs = kinds, true, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}
	})
	for _, u := range []string{internal.URL, "nats://10.20.0.8:4222?subject=x"} {
		if _, err := allowing.Check(ctx, admin.Settings{URL: u}, endpoint.Credentials{}); err != nil {
			t.Errorf("%s with AllowCIDRs 10.20.0.0/16: %v", u, err)
		}
	}
	if _, err := allowing.Check(ctx, admin.Settings{URL: "https://10.21.0.7/hook"}, endpoint.Credentials{}); fieldError(t, err).Setting != admin.SettingURL {
		t.Errorf("a private address outside AllowCIDRs: %v, want refused", err)
	}
}

// A type glob the store could not keep as it is (empty, with a comma,
// with white space around it) is refused on Check and Update; the
// concurrency is bounded by ConcurrencyMax.
func TestTypesAndConcurrencyRefusals(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s, nil)
		created, err := a.Create(ctx, admin.Settings{Name: "a", URL: publicURL, Types: []string{"order.*"}}, endpoint.Credentials{})
		if err != nil {
			t.Fatal(err)
		}
		for _, types := range [][]string{{"a,b"}, {" c"}, {"c "}, {"order.*", ""}, {"\tx"}} {
			if _, err := a.Check(ctx, admin.Settings{URL: publicURL, Types: types}, endpoint.Credentials{}); fieldError(t, err).Setting != admin.SettingTypes {
				t.Errorf("Check of types %q: %v, want types refused", types, err)
			}
			if _, err := a.Update(ctx, created.Endpoint.ID, admin.Change{Types: &types}); fieldError(t, err).Setting != admin.SettingTypes {
				t.Errorf("Update to types %q: %v, want types refused", types, err)
			}
		}
		if _, err := a.Check(ctx, admin.Settings{URL: publicURL, Concurrency: admin.ConcurrencyMax + 1}, endpoint.Credentials{}); fieldError(t, err).Setting != admin.SettingConcurrency {
			t.Errorf("Check of concurrency %d: %v, want refused", admin.ConcurrencyMax+1, err)
		}
		if _, err := a.Update(ctx, created.Endpoint.ID, admin.Change{Concurrency: ptr(admin.ConcurrencyMax + 1)}); fieldError(t, err).Setting != admin.SettingConcurrency {
			t.Errorf("Update to concurrency %d: %v, want refused", admin.ConcurrencyMax+1, err)
		}
		if _, err := a.Update(ctx, created.Endpoint.ID, admin.Change{Concurrency: ptr(admin.ConcurrencyMax)}); err != nil {
			t.Errorf("Update to concurrency %d: %v", admin.ConcurrencyMax, err)
		}
		e := rows(t, s)[0]
		if len(e.Types) != 1 || e.Types[0] != "order.*" || e.Concurrency != admin.ConcurrencyMax {
			t.Errorf("stored types %q, concurrency %d: want [order.*], %d", e.Types, e.Concurrency, admin.ConcurrencyMax)
		}
	})
}

// CreateWithState writes an endpoint disabled in its one write; a state
// other than enabled and disabled is refused.
func TestCreateWithState(t *testing.T) {
	bothStores(t, func(t *testing.T, s store.Endpoints) {
		ctx := context.Background()
		a := newAdmin(t, s, nil)
		c, err := a.CreateWithState(ctx, admin.Settings{Name: "off", URL: publicURL}, endpoint.Credentials{}, store.EndpointDisabled)
		if err != nil {
			t.Fatal(err)
		}
		if c.Endpoint.State != store.EndpointDisabled {
			t.Errorf("Created's state %q, want disabled", c.Endpoint.State)
		}
		if e := rows(t, s)[0]; e.State != store.EndpointDisabled || !e.UpdatedAt.Equal(e.CreatedAt) {
			t.Errorf("stored state %q, updated %v after created %v: want disabled in the create's one write", e.State, e.UpdatedAt, e.CreatedAt)
		}
		if _, err := a.CreateWithState(ctx, admin.Settings{Name: "x", URL: publicURL}, endpoint.Credentials{}, store.EndpointAutoDisabled); fieldError(t, err).Setting != admin.SettingState {
			t.Errorf("CreateWithState auto-disabled: %v, want state refused", err)
		}
	})
}
