// Package natstest gives tests a real NATS JetStream: the machine's server
// (NATS_URL, default nats://127.0.0.1:4222) with a fresh stream per test,
// or nats-server processes of their own, a single one or a cluster, that a
// test can stop and start again for its faults.
package natstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ServerBinary is the nats-server program the tests start (Debian's
// package installs it there).
const ServerBinary = "/usr/sbin/nats-server"

// startTimeout bounds the wait for a server to accept connections.
const startTimeout = 20 * time.Second

// URL is the shared server's URL: $TEST_NATS_URL or nats://127.0.0.1:4222.
func URL() string {
	if u := os.Getenv("TEST_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// Connect connects to url, failing the test when it cannot, and closes the
// connection when the test ends.
func Connect(t testing.TB, url string) (*natsgo.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := natsgo.Connect(url, natsgo.Timeout(5*time.Second), natsgo.MaxReconnects(-1), natsgo.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("natstest: connect to %s (is nats-server -js running?): %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// Name returns a new name with prefix, unique to this run: for streams,
// consumers and subject prefixes.
func Name(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + strings.ToUpper(hex.EncodeToString(b))
}

// Stream creates a stream named after the test, capturing "PREFIX.>" for a
// new PREFIX, with a duplicate window of two minutes, and deletes it when
// the test ends. It returns the stream and its subject prefix (without the
// trailing dot). edit, when not nil, changes the configuration first.
func Stream(t testing.TB, js jetstream.JetStream, edit func(*jetstream.StreamConfig)) (jetstream.Stream, string) {
	t.Helper()
	name := Name("T")
	prefix := strings.ToLower(name)
	cfg := jetstream.StreamConfig{
		Name:       name,
		Subjects:   []string{prefix + ".>"},
		Storage:    jetstream.FileStorage,
		Duplicates: 2 * time.Minute,
	}
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := createStream(ctx, t, js, cfg)
	if err != nil {
		t.Fatalf("natstest: create stream %s: %v%s", name, err, serverLogTail())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, name)
	})
	return st, prefix
}

// storeFailedCode is JetStream's error code for "error creating store for
// stream": the server could not set up the stream's files (the cause is in
// its own log only). A shared server under the load of parallel test
// packages has answered it once in CI to a create that succeeded when
// sent again.
const storeFailedCode = 10049

// noPeersCode is JetStream's error code for "no suitable peers for
// placement": a cluster just started has a meta leader (StartCluster
// waits for it) that does not know every peer yet, so a replicated
// stream cannot be placed; it can a moment later.
const noPeersCode = 10005

// storageDirCode is JetStream's error code for "could not create storage
// directory": the shared server removes an account's directory when its
// last stream is deleted, and a create racing that removal fails (seen
// twice in a day of parallel test packages); sent again, it succeeds.
const storageDirCode = 10077

// retriedCodes are the error codes a stream's create is sent again for.
var retriedCodes = []jetstream.ErrorCode{storeFailedCode, noPeersCode, storageDirCode}

// createStream creates cfg's stream, sending the create again, up to ten
// times in all, while the server answers one of retriedCodes.
func createStream(ctx context.Context, t testing.TB, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	for attempt := 1; ; attempt++ {
		st, err := js.CreateStream(ctx, cfg)
		var apiErr *jetstream.APIError
		if err == nil || attempt == 10 || !errors.As(err, &apiErr) || !slices.Contains(retriedCodes, apiErr.ErrorCode) {
			return st, err
		}
		t.Logf("natstest: create stream %s, attempt %d: %v; trying again", cfg.Name, attempt, err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
}

// serverLogFile is where the machine's shared nats-server logs (the
// start command in .ci/run).
const serverLogFile = "/var/log/nats-server.log"

// serverLogTail returns the last lines of the shared server's log that
// report errors or warnings, for a failure message: the server tells its
// clients only a fixed sentence for some failures.
func serverLogTail() string {
	b, err := os.ReadFile(serverLogFile)
	if err != nil {
		return ""
	}
	var kept []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "[ERR]") || strings.Contains(line, "[WRN]") {
			kept = append(kept, line)
		}
	}
	if len(kept) == 0 {
		return ""
	}
	return "\nthe server's last warnings and errors (" + serverLogFile + "):\n" + strings.Join(kept[max(0, len(kept)-10):], "\n")
}

// MessageIDs reads every message st holds and counts them by Nats-Msg-Id:
// a stream without duplicates has a count of 1 for each id.
func MessageIDs(t testing.TB, st jetstream.Stream) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatalf("natstest: stream info: %v", err)
	}
	ids := map[string]int{}
	if info.State.Msgs == 0 {
		return ids
	}
	// A consumer of its own, created again while the stream has just
	// changed leaders and cannot yet.
	var cons jetstream.Consumer
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 5*time.Second)
		cons, err = st.CreateConsumer(attempt, jetstream.ConsumerConfig{
			AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, Replicas: 1, InactiveThreshold: time.Minute,
		})
		cancelAttempt()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("natstest: create a consumer to read the stream: %v", err)
		}
	}
	defer func() { _ = st.DeleteConsumer(context.Background(), cons.CachedInfo().Name) }()
	for read := uint64(0); read < info.State.Msgs; {
		batch, err := cons.Fetch(int(min(info.State.Msgs-read, 10_000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatalf("natstest: fetch: %v", err)
		}
		for m := range batch.Messages() {
			ids[m.Headers().Get(jetstream.MsgIDHeader)]++
			read++
		}
		if err := batch.Error(); err != nil {
			t.Fatalf("natstest: fetch: %v", err)
		}
	}
	return ids
}

// Server is a nats-server process of a test's own, with JetStream, on a
// port and store directory that stay the same across Stop and Start.
type Server struct {
	t    testing.TB
	Name string
	// Port is the client port; URL is nats://127.0.0.1:Port.
	Port int
	URL  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartServer starts a nats-server with JetStream on a free port and a
// temporary store, stopped when the test ends; extra are more of its
// flags, such as --user and --pass.
func StartServer(t testing.TB, extra ...string) *Server {
	t.Helper()
	s := newServer(t, "n1", extra)
	s.Start()
	return s
}

// StartCluster starts n nats-servers with JetStream, routed into one
// cluster on loopback, and waits until JetStream has a meta leader.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	routePorts := make([]int, n)
	for i := range routePorts {
		routePorts[i] = FreePort(t)
	}
	routes := make([]string, n)
	for i, p := range routePorts {
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(p)
	}
	cluster := Name("c")
	servers := make([]*Server, n)
	for i := range servers {
		servers[i] = newServer(t, fmt.Sprintf("n%d", i+1), []string{
			"--cluster_name", cluster,
			"--cluster", routes[i],
			"--routes", strings.Join(routes, ","),
		})
	}
	for _, s := range servers {
		s.Start()
	}
	_, js := Connect(t, servers[0].URL)
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return servers
		}
		if time.Now().After(deadline) {
			t.Fatalf("natstest: the cluster's JetStream is not ready after %s: %v", startTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func newServer(t testing.TB, name string, extra []string) *Server {
	if _, err := os.Stat(ServerBinary); err != nil {
		t.Fatalf("natstest: %s is missing (apt-get install nats-server): %v", ServerBinary, err)
	}
	port := FreePort(t)
	dir := filepath.Join(t.TempDir(), name)
	s := &Server{t: t, Name: name, Port: port, URL: "nats://127.0.0.1:" + strconv.Itoa(port)}
	s.args = append([]string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir, "-n", name}, extra...)
	t.Cleanup(s.Stop)
	return s
}

// Start starts the server and waits until it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	s.cmd = exec.Command(ServerBinary, s.args...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the test
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("natstest: start nats-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(s.cmd, s.done)
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.Port), time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		select {
		case <-s.done:
			s.t.Fatalf("natstest: nats-server %s exited at start", s.Name)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("natstest: nats-server %s does not accept connections after %s", s.Name, startTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL: a crash, its clients' connections cut)
// and waits for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
