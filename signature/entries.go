package signature

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxAsymmetricSignatures is the most v1a entries a signature header may
// hold for a Verifier with public keys: each entry costs an ed25519
// verification per key, and a sender has one per signing key, two or three
// during a rotation.
const MaxAsymmetricSignatures = 8

// strictBase64 accepts only the canonical encoding, the one Sign writes.
var strictBase64 = base64.StdEncoding.Strict()

// checkID refuses ids the signed content could not keep apart from the
// timestamp.
func checkID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidID)
	case strings.Contains(id, "."):
		return fmt.Errorf("%w: contains \".\"", ErrInvalidID)
	}
	return nil
}

// formatTimestamp writes ts as the timestamp header does: unix seconds.
func formatTimestamp(ts time.Time) string { return strconv.FormatInt(ts.Unix(), 10) }

// parseTimestamp reads a timestamp header: decimal digits only.
func parseTimestamp(s string) (time.Time, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return time.Time{}, false
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	return time.Unix(sec, 0), err == nil
}

// message is what one signature of a request covers, in a scheme: its body,
// or its metadata.
type message struct {
	scheme    Scheme
	id        string
	timestamp string // the header's text
	body      []byte
	// metadata, when isMetadata is set, takes the place of the body: its
	// content is signed as a body would be. (A value, not a pointer: what a
	// message points to escapes to the heap through the hash.)
	metadata   Metadata
	isMetadata bool
	content    []byte // id.timestamp.body in one piece, made by signed
}

// prefixLen is the length of what the scheme signs before the body.
func (m *message) prefixLen() int {
	n := len(m.timestamp)
	if m.scheme == Standard {
		n += len(m.id) + 2
	}
	if m.isMetadata {
		n += m.metadata.contentLen(m.id)
	}
	return n
}

// appendPrefix appends to dst what the scheme signs before the body:
// "id.timestamp." in Standard, "timestamp" in XSignature, followed by the
// metadata content for a message of metadata. (The content is built into
// the hash's own buffer this way, which a separate body slice could not
// be without escaping to the heap.)
func (m *message) appendPrefix(dst []byte) []byte {
	if m.scheme == XSignature {
		dst = append(dst, m.timestamp...)
	} else {
		dst = append(append(append(append(dst, m.id...), '.'), m.timestamp...), '.')
	}
	if m.isMetadata {
		dst = m.metadata.appendContent(dst, m.id)
	}
	return dst
}

// signed returns the whole signed content, which ed25519 needs in one
// piece; it is made once, on first use, as only v1a keys need it.
func (m *message) signed() []byte {
	if m.content == nil {
		m.content = append(m.appendPrefix(make([]byte, 0, m.prefixLen()+len(m.body))), m.body...)
	}
	return m.content
}

// mac computes the HMAC-SHA256 of m under k, an HMAC key, into sum without
// copying the body, with a hash of k's pool.
func (m *message) mac(k key, sum *[sha256.Size]byte) {
	st := k.macs.Get().(*macState)
	st.prefix = m.appendPrefix(st.prefix[:0])
	st.hash.Write(st.prefix)
	st.hash.Write(m.body)
	copy(sum[:], st.hash.Sum(st.sum[:0]))
	st.hash.Reset()
	k.macs.Put(st)
}

// appendEntry appends the signature header entry of m under k to dst:
// "v1,<base64 HMAC>" or "v1a,<base64 ed25519 signature>" in Standard,
// "sha256=<hex HMAC>" in XSignature.
func (m *message) appendEntry(dst []byte, k key) []byte {
	if k.private != nil {
		return base64.StdEncoding.AppendEncode(append(dst, "v1a,"...), ed25519.Sign(k.private, m.signed()))
	}
	var sum [sha256.Size]byte
	m.mac(k, &sum)
	if m.scheme == XSignature {
		return hex.AppendEncode(append(dst, "sha256="...), sum[:])
	}
	return base64.StdEncoding.AppendEncode(append(dst, "v1,"...), sum[:])
}

// entries are the well-formed signatures of a header.
type entries struct {
	macs       [][]byte // v1 or sha256=: 32 bytes each
	signatures [][]byte // v1a: 64 bytes each
}

// parseEntries returns the well-formed entries of a signature header:
// space-separated "v1,<base64>" and "v1a,<base64>" for Standard (other
// versions are skipped), comma- or space-separated "sha256=<hex>" for
// XSignature.
func (s Scheme) parseEntries(header string) entries {
	var e entries
	for _, entry := range strings.FieldsFunc(header, s.isSeparator) {
		if s == XSignature {
			encoded, ok := strings.CutPrefix(entry, "sha256=")
			if mac, err := hex.DecodeString(encoded); ok && err == nil && len(mac) == sha256.Size {
				e.macs = append(e.macs, mac)
			}
			continue
		}
		version, encoded, _ := strings.Cut(entry, ",")
		b, err := strictBase64.DecodeString(encoded)
		switch {
		case err != nil:
		case version == "v1" && len(b) == sha256.Size:
			e.macs = append(e.macs, b)
		case version == "v1a" && len(b) == ed25519.SignatureSize:
			e.signatures = append(e.signatures, b)
		}
	}
	return e
}

func (s Scheme) isSeparator(r rune) bool {
	return r == ' ' || (s == XSignature && r == ',')
}

// matches reports whether one of e is m's signature under k: HMACs are
// compared in constant time, ed25519 signatures verified with the public
// key.
func (e entries) matches(m *message, k key) bool {
	if k.public != nil {
		for _, sig := range e.signatures {
			if ed25519.Verify(k.public, m.signed(), sig) {
				return true
			}
		}
		return false
	}
	var want [sha256.Size]byte
	m.mac(k, &want)
	for _, mac := range e.macs {
		if hmac.Equal(mac, want[:]) {
			return true
		}
	}
	return false
}
