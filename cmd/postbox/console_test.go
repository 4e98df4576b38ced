package main_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
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

// consoleLogin posts the login form of the console at base with the token,
// through a client that says it is behind TLS (X-Forwarded-Proto), and
// returns the session cookie it got.
func consoleLogin(t *testing.T, base string) *http.Cookie {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on the login page:\n%s", body)
	}
	form := url.Values{"token": {consoleToken}, "csrf": {string(m[1])}}
	req, _ := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	res, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d, want 303", res.StatusCode)
	}
	for _, ck := range res.Cookies() {
		if ck.Name == "postbox_console" {
			return ck
		}
	}
	t.Fatal("login set no session cookie")
	return nil
}

// --trusted-proxy: behind it the session cookie is Secure when the proxy
// says https; without it the same header is not believed. --session-max
// bounds the cookie's life.
func TestConsoleTrustedProxyAndSessionFlags(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "console.db")
	runOK(t, "migrate", "--db", db)
	_, addr := startConsole(t, "--db", db, "--addr", "127.0.0.1:0", "--token", consoleToken,
		"--trusted-proxy", "127.0.0.1/32,::1", "--session-idle", "5m", "--session-max", "2h")
	ck := consoleLogin(t, "http://"+addr)
	if !ck.Secure || ck.MaxAge != 7200 {
		t.Fatalf("behind a trusted proxy saying https: Secure %v, Max-Age %d; want Secure, 7200", ck.Secure, ck.MaxAge)
	}
	_, addr = startConsole(t, "--db", db, "--addr", "127.0.0.1:0", "--token", consoleToken)
	if ck := consoleLogin(t, "http://"+addr); ck.Secure {
		t.Fatal("without --trusted-proxy, X-Forwarded-Proto made the cookie Secure")
	}
	for _, args := range [][]string{
		{"--trusted-proxy", "10.0.0.0/33"},
		{"--trusted-proxy", "proxy.example"},
		{"--session-idle", "-1m"},
		{"--session-max", "0s"},
	} {
		line := usageError(t, append([]string{"console", "--db", db, "--token", consoleToken}, args...)...)
		if !strings.Contains(line, args[0]) {
			t.Errorf("console %v: %q does not name the flag", args, line)
		}
	}
}
