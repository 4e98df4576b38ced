package main_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/internal/logbuf"
	"github.com/postbox-go/postbox/internal/pgtest"
)

const consoleToken = "console-token-for-the-tests"

// startConsole starts "postbox console" with args until the test ends, and
// returns its log and the address it listens on (host:port).
func startConsole(t *testing.T, args ...string) (*logbuf.Buffer, string) {
	t.Helper()
	logs := &logbuf.Buffer{}
	cmd := command(append([]string{"console"}, args...)...)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("console log:\n%s", logs)
		}
	})
	listening := regexp.MustCompile(`console on http://([^/ ]+)/`)
	var addr string
	waitFor(t, "the console's start", 15*time.Second, func() bool {
		m := listening.FindStringSubmatch(logs.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	return logs, addr
}

// nonLoopbackIP is an address of this machine that other hosts may reach;
// "" when it has none.
func nonLoopbackIP(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	return ""
}

// A console that other hosts could reach is refused without a token.
func TestConsoleRefusesNonLoopbackAddrWithoutToken(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "console.db")
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.2:0"} {
		line := usageError(t, "console", "--db", db, "--addr", addr)
		if !strings.Contains(line, "not a loopback address") || !strings.Contains(line, "--token") {
			t.Fatalf("console --addr %s without a token: %q", addr, line)
		}
	}
	if line := usageError(t, "console", "--db", db, "--token", "short"); !strings.Contains(line, "want at least 16") {
		t.Fatalf("console with a short token: %q", line)
	}
}

// From outside: on a non-loopback address, a request without the token
// gets 401 and one with it the overview. The log says where the console
// listens, on which store (without the database password) and whether it
// is read-only.
func TestConsoleOnNonLoopbackAddrAsksForTheToken(t *testing.T) {
	_, db := schemaStore(t)
	dbURL := strings.Replace(pgtest.URL(), "postgres@", "postgres:s3cret-db-password@", 1)
	if dbURL == pgtest.URL() {
		t.Fatalf("cannot add a password to %s", pgtest.URL())
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(consoleToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host := nonLoopbackIP(t)
	bind := host
	if host == "" {
		bind, host = "0.0.0.0", "127.0.0.1" // no other interface: all of them
	}
	logs, addr := startConsole(t, "--db", dbURL, db[2], db[3], "--addr", bind+":0", "--token-file", tokenFile, "--read-only")
	_, port, _ := net.SplitHostPort(addr)
	base := "http://" + net.JoinHostPort(host, port)

	client := &http.Client{Timeout: 10 * time.Second}
	res, err := client.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET %s/ without the token: %d, want 401", base, res.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	res, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `id="count-failed"`) {
		t.Fatalf("GET / with the token: %d\n%s", res.StatusCode, body)
	}
	log := logs.String()
	for _, want := range []string{"read_only=true", "auth=token", "schema " + db[3]} {
		if !strings.Contains(log, want) {
			t.Errorf("start log lacks %q:\n%s", want, log)
		}
	}
	for _, secret := range []string{"s3cret-db-password", consoleToken} {
		if strings.Contains(log, secret) || strings.Contains(string(body), secret) {
			t.Fatalf("the console shows a secret (%q)", secret)
		}
	}
}
