package pgtest_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// The logical cluster streams (wal_level = logical), whatever the shared
// test server's setting, and is the same for every test of the binary.
func TestLogicalClusterHasLogicalWAL(t *testing.T) {
	url := pgtest.LogicalURL(t)
	if again := pgtest.LogicalURL(t); again != url {
		t.Fatalf("a second LogicalURL gave %s, want the same cluster %s", again, url)
	}
	var level string
	if err := pgtest.PoolAt(t, url).QueryRow(context.Background(), "show wal_level").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "logical" {
		t.Fatalf("the logical cluster has wal_level = %s", level)
	}
}

// The replica cluster has PostgreSQL's default wal_level, whatever the
// shared test server's, for the tests of what WAL mode says there.
func TestReplicaClusterHasReplicaWAL(t *testing.T) {
	var level string
	if err := pgtest.PoolAt(t, pgtest.ReplicaURL(t)).QueryRow(context.Background(), "show wal_level").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "replica" {
		t.Fatalf("the replica cluster has wal_level = %s", level)
	}
}

// A test binary that dies leaves no cluster behind: its supervisor stops
// the server and removes its directory once the binary's end of the pipe
// closes. The child is this test binary, killed with SIGKILL once its
// cluster is up.
func TestClusterGoesWithTheTestBinary(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") != "" {
		url := pgtest.LogicalURL(t)
		os.Stdout.WriteString("url " + url + "\n")
		time.Sleep(time.Minute) // killed before
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestClusterGoesWithTheTestBinary$", "-test.v")
	cmd.Env = append(os.Environ(), "PGTEST_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var url string
	for sc := bufio.NewScanner(out); url == "" && sc.Scan(); {
		if u, ok := strings.CutPrefix(sc.Text(), "url "); ok {
			url = u
		}
	}
	if url == "" {
		t.Fatal("the child ended before its cluster was up")
	}
	pool := pgtest.PoolAt(t, url)
	var dir string
	if err := pool.QueryRow(context.Background(), "show data_directory").Scan(&dir); err != nil {
		t.Fatal(err)
	}
	pool.Close()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, statErr := os.Stat(dir)
		if os.IsNotExist(statErr) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster's directory %s is still there after its test binary was killed (%v)", dir, statErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := exec.Command("pg_isready", "-q", "-d", url).Run(); err == nil {
		t.Fatalf("the cluster at %s still accepts connections", url)
	}
}
