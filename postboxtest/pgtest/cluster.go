package pgtest

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A throwaway cluster is a PostgreSQL server of the test binary's own,
// started from the installed server binaries with settings the shared test
// server does not have (WAL mode needs wal_level = logical, a setting that
// takes a restart): initdb in a temporary directory, a free port on
// 127.0.0.1, its unix socket in that directory, fsync off. One per setting
// is started per test binary, on first use, and shared by its tests.
//
// It is supervised by a shell (cluster.sh) that waits for its standard
// input to close: when the test binary exits, however it ends (a panic,
// a timeout, SIGKILL), the pipe closes and the shell stops the server and
// removes the directory. The shell has a process group of its own, so that
// a Ctrl-C of go test reaches the test binary, not the cleanup.

//go:embed cluster.sh
var clusterScript string

// BinDirEnv names the environment variable that points at the directory of
// the PostgreSQL server binaries (initdb, postgres, pg_isready) for the
// throwaway clusters; by default the newest /usr/lib/postgresql/*/bin.
const BinDirEnv = "TEST_PG_BINDIR"

// clusterStartAttempts bounds the starts of one cluster: a port found free
// may be taken by another test binary before the server binds it.
const clusterStartAttempts = 3

// clusterStartTimeout bounds initdb and the server's start.
const clusterStartTimeout = 2 * time.Minute

// cluster is one throwaway server, started once.
type cluster struct {
	walLevel string
	once     sync.Once
	done     chan struct{}
	url      string
	err      error
	// stop is the write end of the supervisor's standard input, open for
	// the life of the process (and referenced here, so that no finalizer
	// closes it).
	stop io.Closer
}

var (
	clustersMu sync.Mutex
	clusters   = map[string]*cluster{}
)

// LogicalURL returns the URL of the test binary's throwaway cluster with
// wal_level = logical, starting it (or waiting for the start that
// StartLogical began). The cluster is the binary's, shared by its tests:
// each test works in schemas (or databases) of its own there. It fails
// the test when the cluster cannot start, saying why (no PostgreSQL server
// binaries installed, for one): it never skips.
func LogicalURL(t testing.TB) string {
	t.Helper()
	return clusterURL(t, "logical")
}

// ReplicaURL is LogicalURL with wal_level = replica (PostgreSQL's default),
// for tests of what WAL mode says on a server that cannot stream.
func ReplicaURL(t testing.TB) string {
	t.Helper()
	return clusterURL(t, "replica")
}

// StartLogical begins starting the logical cluster in the background, so
// that its start overlaps the package's other tests: call it from an init
// function of a test package whose tests use LogicalURL.
func StartLogical() { get("logical").start() }

func clusterURL(t testing.TB, walLevel string) string {
	t.Helper()
	c := get(walLevel)
	c.start()
	<-c.done
	if c.err != nil {
		t.Fatalf("pgtest: a throwaway PostgreSQL cluster with wal_level = %s: %v", walLevel, c.err)
	}
	return c.url
}

func get(walLevel string) *cluster {
	clustersMu.Lock()
	defer clustersMu.Unlock()
	c, ok := clusters[walLevel]
	if !ok {
		c = &cluster{walLevel: walLevel, done: make(chan struct{})}
		clusters[walLevel] = c
	}
	return c
}

// start starts the cluster in the background, once.
func (c *cluster) start() {
	c.once.Do(func() {
		go func() {
			defer close(c.done)
			c.url, c.stop, c.err = startCluster(c.walLevel)
		}()
	})
}

// startCluster starts a cluster and returns its URL and what stops it.
func startCluster(walLevel string) (string, io.Closer, error) {
	bin, err := binDir()
	if err != nil {
		return "", nil, err
	}
	for attempt := 1; ; attempt++ {
		url, stop, err := startClusterOnce(bin, walLevel)
		if err == nil || attempt == clusterStartAttempts || !strings.Contains(err.Error(), "could not bind") {
			return url, stop, err
		}
	}
}

// startClusterOnce runs cluster.sh on a free port and waits for its
// "ready" line; what it printed before it exited is the error otherwise.
func startClusterOnce(bin, walLevel string) (string, io.Closer, error) {
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	base, cred, err := clusterDir()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", clusterScript, "cluster.sh", bin, base, strconv.Itoa(port), walLevel)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	stdin, err := cmd.StdinPipe() // never written: its end is the signal to stop
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(base)
		return "", nil, fmt.Errorf("start the supervisor of %s: %w", base, err)
	}
	ready := make(chan error, 1)
	go func() { ready <- waitReady(stdout) }()
	select {
	case err = <-ready:
	case <-time.After(clusterStartTimeout):
		err = fmt.Errorf("not ready after %s", clusterStartTimeout)
	}
	if err != nil {
		_ = stdin.Close()
		return "", nil, fmt.Errorf("binaries %s: %w", bin, err)
	}
	go func() { _ = cmd.Wait() }()
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", port), stdin, nil
}

// waitReady reads the supervisor's output up to its "ready" line; when it
// ends without one, the output is the error.
func waitReady(r io.Reader) error {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if sc.Text() == "ready" {
			go func() { _, _ = io.Copy(io.Discard, r) }()
			return nil
		}
		out = append(out, sc.Text())
	}
	if len(out) > 20 {
		out = out[len(out)-20:]
	}
	return errors.New(strings.Join(out, "\n"))
}

// binDir finds the PostgreSQL server binaries: $TEST_PG_BINDIR, or the
// newest major version in /usr/lib/postgresql (Debian's layout).
func binDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return dir, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(found) == 0 {
		return "", fmt.Errorf("no PostgreSQL server binaries (no /usr/lib/postgresql/*/bin/initdb): install the server package (Debian: postgresql), or set %s to the directory of initdb and postgres", BinDirEnv)
	}
	version := func(path string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(path))), 64)
		return v
	}
	newest := slices.MaxFunc(found, func(a, b string) int {
		switch va, vb := version(a), version(b); {
		case va < vb:
			return -1
		case va > vb:
			return 1
		}
		return 0
	})
	return filepath.Dir(newest), nil
}

// clusterDir makes the cluster's directory. initdb refuses to run as root:
// a root test binary runs the cluster as the postgres user, who owns the
// directory.
func clusterDir() (string, *syscall.Credential, error) {
	base, err := os.MkdirTemp("", "postbox-pgtest-")
	if err != nil {
		return "", nil, err
	}
	if os.Geteuid() != 0 {
		return base, nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		_ = os.RemoveAll(base)
		return "", nil, fmt.Errorf("running as root, the cluster runs as the postgres user: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	if err := os.Chown(base, int(uid), int(gid)); err != nil {
		_ = os.RemoveAll(base)
		return "", nil, err
	}
	return base, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
