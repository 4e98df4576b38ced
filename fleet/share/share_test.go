package share

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// config returns the test server's connection config.
func config(t *testing.T) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// fleet returns a fleet name of the test's own.
func fleet(t *testing.T) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "test-" + hex.EncodeToString(b)
}

func join(t *testing.T, opt Options) *Member {
	t.Helper()
	m, err := Join(t.Context(), config(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func live(t *testing.T, m *Member) []int {
	t.Helper()
	l, err := m.Live(t.Context())
	if err != nil {
		t.Fatalf("slot %d: %v", m.Slot(), err)
	}
	return l
}

// watch runs m.Watch until the test ends, and returns what it reports:
// the live sets, and a channel closed when Watch returns, whose error is
// then in *err.
func watch(t *testing.T, m *Member, every time.Duration) (<-chan []int, <-chan struct{}, *error) {
	ctx, cancel := context.WithCancel(context.Background())
	sets := make(chan []int, 100)
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = m.Watch(ctx, every, func(l []int) { sets <- l })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if err != nil && !errors.Is(err, ErrLost) {
			t.Errorf("watch: %v", err)
		}
	})
	return sets, done, &err
}

// await waits for sets to report want, for up to within.
func await(t *testing.T, who string, sets <-chan []int, want []int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	var last []int
	for {
		select {
		case l := <-sets:
			last = l
			if slices.Equal(l, want) {
				return
			}
		case <-deadline:
			t.Fatalf("%s: the live slots are %v after %v, want %v", who, last, within, want)
		}
	}
}

func TestJoinLeaveRejoin(t *testing.T) {
	t.Parallel()
	opt := Options{Fleet: fleet(t)}
	a, b, c := join(t, opt), join(t, opt), join(t, opt)
	for i, m := range []*Member{a, b, c} {
		if m.Slot() != i {
			t.Fatalf("member %d took slot %d", i, m.Slot())
		}
	}
	for _, m := range []*Member{a, b, c} {
		if got := live(t, m); !slices.Equal(got, []int{0, 1, 2}) {
			t.Fatalf("slot %d sees %v, want [0 1 2]", m.Slot(), got)
		}
	}

	const every = 100 * time.Millisecond
	aSets, _, _ := watch(t, a, every)
	cSets, _, _ := watch(t, c, every)
	await(t, "slot 0", aSets, []int{0, 1, 2}, time.Second)
	await(t, "slot 2", cSets, []int{0, 1, 2}, time.Second)

	b.Close()
	// Within one tick (and the poll's own time).
	await(t, "slot 0", aSets, []int{0, 2}, every+500*time.Millisecond)
	await(t, "slot 2", cSets, []int{0, 2}, every+500*time.Millisecond)
	if _, err := b.Live(t.Context()); !errors.Is(err, ErrLost) {
		t.Fatalf("a closed member's Live: %v, want ErrLost", err)
	}

	d := join(t, opt)
	if d.Slot() != 1 {
		t.Fatalf("the new member took slot %d, want the freed 1", d.Slot())
	}
	await(t, "slot 0", aSets, []int{0, 1, 2}, every+500*time.Millisecond)
	await(t, "slot 2", cSets, []int{0, 1, 2}, every+500*time.Millisecond)
	if got := live(t, d); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("the new member sees %v", got)
	}
}

func TestTerminatedMemberIsLost(t *testing.T) {
	t.Parallel()
	opt := Options{Fleet: fleet(t)}
	a, b := join(t, opt), join(t, opt)
	const every = 50 * time.Millisecond
	aSets, _, _ := watch(t, a, every)
	_, bDone, bErr := watch(t, b, every)
	await(t, "slot 0", aSets, []int{0, 1}, time.Second)

	// Find b's session as an operator would: by application name and lock.
	pool := pgtest.Pool(t)
	var pid uint32
	err := pool.QueryRow(t.Context(), `select a.pid from pg_stat_activity a join pg_locks l using (pid)
 where a.application_name = $1 and l.locktype = 'advisory' and l.objsubid = 2
   and l.classid = ($2::int8 & 4294967295)::oid and l.objid = 1`, ApplicationName, int64(Key(opt.Fleet))).Scan(&pid)
	if err != nil {
		t.Fatal(err)
	}
	if pid != b.pid {
		t.Fatalf("slot 1's session is %d, the member's %d", pid, b.pid)
	}
	if _, err := pool.Exec(t.Context(), "select pg_terminate_backend($1)", int32(pid)); err != nil {
		t.Fatal(err)
	}

	select {
	case <-bDone:
		if !errors.Is(*bErr, ErrLost) {
			t.Fatalf("the terminated member's Watch: %v, want ErrLost", *bErr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the terminated member's Watch did not return")
	}
	if _, err := b.Live(t.Context()); !errors.Is(err, ErrLost) {
		t.Fatalf("the terminated member's Live: %v, want ErrLost", err)
	}
	await(t, "slot 0", aSets, []int{0}, 2*time.Second)
	if got := live(t, a); !slices.Equal(got, []int{0}) {
		t.Fatalf("slot 0 sees %v", got)
	}

	// The slot is free again.
	if c := join(t, opt); c.Slot() != 1 {
		t.Fatalf("the next member took slot %d, want 1", c.Slot())
	}
}

func TestFleetsDoNotMix(t *testing.T) {
	t.Parallel()
	// One fleet whose key is negative, one whose key is positive, to check
	// how pg_locks shows both.
	var neg, pos string
	for neg == "" || pos == "" {
		f := fleet(t)
		if Key(f) < 0 {
			neg = f
		} else {
			pos = f
		}
	}
	n0, n1 := join(t, Options{Fleet: neg}), join(t, Options{Fleet: neg})
	p0 := join(t, Options{Fleet: pos})
	if n0.Slot() != 0 || n1.Slot() != 1 || p0.Slot() != 0 {
		t.Fatalf("slots %d %d / %d", n0.Slot(), n1.Slot(), p0.Slot())
	}
	if got := live(t, n1); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("fleet %s (key %d) sees %v", neg, Key(neg), got)
	}
	if got := live(t, p0); !slices.Equal(got, []int{0}) {
		t.Fatalf("fleet %s (key %d) sees %v", pos, Key(pos), got)
	}
}

func TestKeyIsStable(t *testing.T) {
	// FNV-1a 32 of "postbox fleet:default".
	if Key("") != Key(FleetDefault) {
		t.Fatal("the empty fleet is not the default one")
	}
	h := uint32(2166136261)
	for _, c := range []byte(KeyPrefix + "relays") {
		h ^= uint32(c)
		h *= 16777619
	}
	if Key("relays") != int32(h) {
		t.Fatalf("Key(relays) = %d, want %d", Key("relays"), int32(h))
	}
}

func TestJoinErrorHidesPassword(t *testing.T) {
	t.Parallel()
	const pw = "hunter2-secret"
	cfg, err := pgx.ParseConfig("postgres://postgres:" + pw + "@127.0.0.1:1/postgres?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Join(t.Context(), cfg, Options{Fleet: fleet(t), Timeout: 2 * time.Second})
	if err == nil {
		t.Fatal("joined through a closed port")
	}
	if strings.Contains(err.Error(), pw) {
		t.Fatalf("the error shows the password: %v", err)
	}
}

func TestWatchStopsWithContext(t *testing.T) {
	t.Parallel()
	m := join(t, Options{Fleet: fleet(t)})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	calls := 0
	if err := m.Watch(ctx, 20*time.Millisecond, func([]int) { calls++ }); err != nil {
		t.Fatalf("watch: %v", err)
	}
	if calls != 1 {
		t.Fatalf("changed called %d times for one unchanged live set", calls)
	}
}
