package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
)

// secretFormsHelp says, in the help of every flag whose value is a secret,
// how the value may be given.
const secretFormsHelp = "given as is, as @FILE (the file's contents, its trailing new line trimmed) or as env:NAME (the environment variable's value); " +
	"as is, it stays in the shell's history and shows in the process list"

// secretValue is a flag whose value is a secret, or says where to read one
// (see readSecret). Its Set never fails and its String is always empty,
// so that no parse error and no help text quotes it.
type secretValue struct {
	spec string
	set  bool
}

func (v *secretValue) String() string { return "" }

func (v *secretValue) Set(s string) error {
	v.spec, v.set = s, true
	return nil
}

// secretList is a repeatable flag whose values hold secrets (--header
// 'Name: value'), read as secretValue's: kept as given until the command
// reads them.
type secretList []string

func (l *secretList) String() string { return "" }

func (l *secretList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// stringList is a repeatable flag of plain values (--oauth2-scope).
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// maxSecretFileSize bounds what @FILE reads: a secret, a certificate
// chain, not a wrong path to a log or a device.
const maxSecretFileSize = 1 << 20

// readSecret returns the secret spec gives: the contents of FILE for
// "@FILE" (one trailing new line trimmed), the value of the environment
// variable NAME for "env:NAME", or spec itself, when literal is true. Its
// errors name the file or the variable, never a secret.
func readSecret(spec string) (value string, literal bool, err error) {
	if path, ok := strings.CutPrefix(spec, "@"); ok {
		b, err := readFileLimited(path, maxSecretFileSize)
		if err != nil {
			return "", false, err
		}
		s := strings.TrimSuffix(string(b), "\n")
		return strings.TrimSuffix(s, "\r"), false, nil
	}
	if name, ok := strings.CutPrefix(spec, "env:"); ok {
		v, set := os.LookupEnv(name)
		if !set {
			return "", false, fmt.Errorf("env:%s: the environment variable is not set", name)
		}
		return v, false, nil
	}
	return spec, true, nil
}

// readFileLimited reads the file at path, refusing one over limit bytes.
func readFileLimited(path string, limit int64) ([]byte, error) {
	if path == "" {
		return nil, errors.New("@FILE: no file named after @")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}

// secretReader reads the secret flags of one command and remembers those
// given as is, to warn about them once.
type secretReader struct{ literal []string }

// read returns the secret of flag name given as spec (readSecret), as a
// usage error naming the flag when it cannot be read. envVar is the
// variable the flag may be read from ("" for a flag read from the command
// line only): a secret that came from there is no literal of the command
// line.
func (r *secretReader) read(name, spec, envVar string) (string, error) {
	v, literal, err := readSecret(spec)
	if err != nil {
		return "", fmt.Errorf("%w: --%s: %v", errUsage, name, err)
	}
	if literal && (envVar == "" || os.Getenv(envVar) != spec) {
		r.given("--" + name)
	}
	return v, nil
}

// given notes that what (a flag, "--url's password") held a secret given
// as is.
func (r *secretReader) given(what string) {
	if !slices.Contains(r.literal, what) {
		r.literal = append(r.literal, what)
	}
}

// urlPassword notes a password in rawURL's user information, given as is
// on the command line (it is moved into the sealed credentials).
func (r *secretReader) urlPassword(rawURL string) {
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			r.given("--url's password")
		}
	}
}

// warning is the warning about the secrets given as is, "" when none was.
func (r *secretReader) warning() string {
	if len(r.literal) == 0 {
		return ""
	}
	return fmt.Sprintf("warning: %s given as is on the command line: it stays in the shell's history and shows in the process list; give @FILE or env:NAME instead",
		strings.Join(r.literal, ", "))
}
