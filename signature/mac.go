package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

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

// mac computes the scheme's HMAC-SHA256 of one request; timestamp is the
// header's text.
func (s Scheme) mac(key []byte, id, timestamp string, body []byte) []byte {
	prefix := make([]byte, 0, len(id)+len(timestamp)+2)
	if s == Standard {
		prefix = append(append(prefix, id...), '.')
	}
	prefix = append(prefix, timestamp...)
	if s == Standard {
		prefix = append(prefix, '.')
	}
	m := hmac.New(sha256.New, key)
	m.Write(prefix)
	m.Write(body)
	return m.Sum(nil)
}

// appendEntry appends the signature header entry of mac to dst.
func (s Scheme) appendEntry(dst, mac []byte) []byte {
	if s == XSignature {
		return hex.AppendEncode(append(dst, "sha256="...), mac)
	}
	return base64.StdEncoding.AppendEncode(append(dst, "v1,"...), mac)
}

// parseEntries returns the MACs of the well-formed entries of a signature
// header: space-separated "v1,<base64>" for Standard (other versions are
// skipped), comma- or space-separated "sha256=<hex>" for XSignature.
func (s Scheme) parseEntries(header string) [][]byte {
	var macs [][]byte
	for _, entry := range strings.FieldsFunc(header, s.isSeparator) {
		var mac []byte
		var err error
		if s == XSignature {
			encoded, ok := strings.CutPrefix(entry, "sha256=")
			if !ok {
				continue
			}
			mac, err = hex.DecodeString(encoded)
		} else {
			encoded, ok := strings.CutPrefix(entry, "v1,")
			if !ok {
				continue
			}
			mac, err = strictBase64.DecodeString(encoded)
		}
		if err == nil && len(mac) == sha256.Size {
			macs = append(macs, mac)
		}
	}
	return macs
}

func (s Scheme) isSeparator(r rune) bool {
	return r == ' ' || (s == XSignature && r == ',')
}
