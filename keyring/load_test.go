package keyring_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/keyring"
)

func writeKeyFile(t *testing.T, text string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secrets.key")
	if err := os.WriteFile(path, []byte(text), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

func TestLoadReadsTheFileWhenGivenElseTheValue(t *testing.T) {
	a, _ := newKey(t)
	b, _ := newKey(t)
	fromFile := mustParse(t, a+","+b)
	fromValue := mustParse(t, b)
	path := writeKeyFile(t, "# keys\n"+a+"\n"+b+"\n", 0o600)

	r, err := keyring.Load(b, path)
	if err != nil || !slices.Equal(r.IDs(), fromFile.IDs()) {
		t.Fatalf("file and value: IDs %v, %v; want the file's %v", r.IDs(), err, fromFile.IDs())
	}
	r, err = keyring.Load(b, "")
	if err != nil || !slices.Equal(r.IDs(), fromValue.IDs()) {
		t.Fatalf("value only: IDs %v, %v; want %v", r.IDs(), err, fromValue.IDs())
	}
}

func TestLoadErrors(t *testing.T) {
	a, _ := newKey(t)
	if _, err := keyring.Load("", ""); !errors.Is(err, keyring.ErrNoKey) || !strings.Contains(err.Error(), keyring.EnvVar) {
		t.Errorf("nothing given: error %v, want ErrNoKey naming %s", err, keyring.EnvVar)
	}
	missing := filepath.Join(t.TempDir(), "absent.key")
	if _, err := keyring.Load(a, missing); err == nil || errors.Is(err, keyring.ErrNoKey) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: error %v, want one naming the path (the value is not used)", err)
	}
	empty := writeKeyFile(t, "# no key yet\n", 0o600)
	if _, err := keyring.Load(a, empty); !errors.Is(err, keyring.ErrNoKey) || !strings.Contains(err.Error(), empty) {
		t.Errorf("file without key: error %v, want ErrNoKey naming the path", err)
	}
	bad := writeKeyFile(t, a+"\n"+a[:30]+"\n", 0o600)
	_, err := keyring.Load("", bad)
	if !errors.Is(err, keyring.ErrMalformedKey) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "key 2 of 2") {
		t.Errorf("malformed key in file: error %v, want ErrMalformedKey naming the path and key 2", err)
	} else {
		assertNotQuoted(t, err.Error(), a)
	}
	if _, err := keyring.Load(a+",nope-nope-nope", ""); !errors.Is(err, keyring.ErrMalformedKey) || !strings.Contains(err.Error(), keyring.EnvVar) {
		t.Errorf("malformed value: error %v, want ErrMalformedKey naming %s", err, keyring.EnvVar)
	} else {
		assertNotQuoted(t, err.Error(), "nope-nope-nope")
	}
	huge := writeKeyFile(t, a+"\n"+strings.Repeat("#", 70<<10), 0o600)
	if _, err := keyring.Load("", huge); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("70 KiB file: error %v, want one saying it is too large", err)
	}
	dir := t.TempDir()
	if _, err := keyring.Load("", dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("a directory: error %v, want one naming it", err)
	}
}

func TestFileTooOpen(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("permission bits do not describe access on Windows")
	}
	a, _ := newKey(t)
	for perm, want := range map[os.FileMode]bool{0o600: false, 0o400: false, 0o640: true, 0o644: true, 0o604: true, 0o660: true} {
		if got := keyring.FileTooOpen(writeKeyFile(t, a, perm)); got != want {
			t.Errorf("mode %o: FileTooOpen %v, want %v", perm, got, want)
		}
	}
	if keyring.FileTooOpen(filepath.Join(t.TempDir(), "absent")) {
		t.Error("FileTooOpen of a missing file reported true")
	}
}

func TestLoadNeverQuotesAKeyGivenAsTheFilesPath(t *testing.T) {
	key := keyring.GenerateKey()
	_, err := keyring.Load("", key)
	if err == nil || strings.Contains(err.Error(), key) || strings.Contains(err.Error(), key[len(keyring.KeyPrefix):len(keyring.KeyPrefix)+12]) {
		t.Fatalf("Load with a key as the file's path: %v, want an error without the key", err)
	}
}
