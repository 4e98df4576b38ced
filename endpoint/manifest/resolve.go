package manifest

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/postbox-go/postbox/endpoint"
)

// MaxSecretFileSize bounds a file a file:PATH reference names: a secret, a
// certificate chain, not a log or a device by mistake.
const MaxSecretFileSize = 1 << 20

// Resolve reads the secrets m's references name: env:NAME with lookupEnv
// (os.LookupEnv when nil), file:PATH from the file (relative to m.Dir).
// Plan calls it with os.LookupEnv when it was not called. Its errors name
// the reference and where the file writes it, never a secret.
func (m *Manifest) Resolve(lookupEnv func(string) (string, bool)) error {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	r := resolver{lookupEnv: lookupEnv, dir: m.Dir}
	for i := range m.Endpoints {
		e := &m.Endpoints[i]
		c, err := r.credentials(e, fmt.Sprintf("endpoints[%d]", i))
		if err != nil {
			return err
		}
		e.creds = c
		if e.URLRef != nil {
			key := fmt.Sprintf("endpoints[%d].url", i)
			u, err := r.read(*e.URLRef, key, true)
			if err != nil {
				return err
			}
			if hasUserInfo(u) {
				return &Error{Line: e.URLRef.Line, Column: e.URLRef.Column, Key: key, Message: e.URLRef.String() +
					": the URL holds user information (user:password@), a credential: give a webhook's as auth.basic (the value is not shown)"}
			}
			e.URL = u
		}
	}
	m.resolved = true
	return nil
}

// resolver reads references.
type resolver struct {
	lookupEnv func(string) (string, bool)
	dir       string
}

// credentials are e's credentials, its references read; key is e's path.
func (r resolver) credentials(e *Endpoint, key string) (endpoint.Credentials, error) {
	var c endpoint.Credentials
	var err error
	if e.Secret != nil {
		if c.Secret, err = r.read(*e.Secret, key+".secret", true); err != nil {
			return c, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(e.Headers)) {
		if c.Headers == nil {
			c.Headers = make(map[string]string, len(e.Headers))
		}
		if c.Headers[name], err = r.read(e.Headers[name], key+".headers."+shortText(name), true); err != nil {
			return c, err
		}
	}
	if a := e.Auth; a != nil {
		switch {
		case a.Basic != nil:
			c.Basic = &endpoint.BasicAuth{User: a.Basic.User}
			if c.Basic.Password, err = r.read(a.Basic.Password, key+".auth.basic.password", true); err != nil {
				return c, err
			}
		case a.Bearer != nil:
			if c.Bearer, err = r.read(*a.Bearer, key+".auth.bearer", true); err != nil {
				return c, err
			}
		case a.OAuth2 != nil:
			o := a.OAuth2
			c.OAuth2 = &endpoint.OAuth2{TokenURL: o.TokenURL, ClientID: o.ClientID, Scopes: o.Scopes, Params: o.Params}
			if c.OAuth2.ClientSecret, err = r.read(o.ClientSecret, key+".auth.oauth2.client_secret", true); err != nil {
				return c, err
			}
		}
	}
	if t := e.TLS; t != nil {
		c.TLS = &endpoint.ClientTLS{}
		for _, part := range []struct {
			ref  *Ref
			name string
			to   *string
		}{{t.Cert, "cert", &c.TLS.CertPEM}, {t.Key, "key", &c.TLS.KeyPEM}, {t.CA, "ca", &c.TLS.CAPEM}} {
			if part.ref == nil {
				continue
			}
			// PEM is read whole, as postbox endpoints add --tls-* reads
			// it, so that an endpoint added either way compares equal.
			if *part.to, err = r.read(*part.ref, key+".tls."+part.name, false); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

// read returns the secret ref names; trim trims one trailing new line
// (\n or \r\n) from a file's contents. An empty secret is refused.
func (r resolver) read(ref Ref, key string, trim bool) (string, error) {
	fail := func(message string) error {
		return &Error{Line: ref.Line, Column: ref.Column, Key: key, Message: ref.String() + ": " + message}
	}
	var value string
	switch ref.Scheme {
	case "env":
		v, ok := r.lookupEnv(ref.Name)
		if !ok {
			return "", fail("the environment variable is not set")
		}
		value = v
	case "file":
		b, err := readFile(r.path(ref.Name))
		if err != nil {
			return "", fail(err.Error())
		}
		value = string(b)
		if trim {
			value = strings.TrimSuffix(strings.TrimSuffix(value, "\n"), "\r")
		}
	default:
		return "", fail("not a reference: want env:NAME or file:PATH")
	}
	if value == "" {
		return "", fail("the secret is empty")
	}
	return value, nil
}

// path is a file reference's path, a relative one under r.dir.
func (r resolver) path(name string) string {
	if r.dir == "" || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(r.dir, name)
}

// readFile reads a regular file of at most MaxSecretFileSize bytes. Its
// errors say what is wrong with the file, never what it holds.
func readFile(path string) ([]byte, error) {
	// Stat first: opening a named pipe would wait for a writer.
	if info, err := os.Stat(path); err != nil {
		return nil, pathError(err)
	} else if !info.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, pathError(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, pathError(err)
	}
	if !info.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSecretFileSize+1))
	if err != nil {
		return nil, pathError(err)
	}
	if len(b) > MaxSecretFileSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxSecretFileSize)
	}
	return b, nil
}

// pathError is err without the path the reference already names.
func pathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
