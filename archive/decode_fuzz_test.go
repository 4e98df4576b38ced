package archive

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"testing"
)

// decodeAll decodes an object's bytes to the end, or to its first error.
func decodeAll(t *testing.T, object []byte) ([][]byte, error) {
	d, err := newDecoder(bytes.NewReader(object), -1)
	if err != nil {
		return nil, err
	}
	var lines [][]byte
	for {
		e, err := d.next()
		if err == io.EOF {
			return lines, nil
		}
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		// What Read hands on, Keep can keep again.
		if err := encodeLine(enc, &e); err != nil {
			t.Fatalf("decoded event %+v does not encode: %v", e, err)
		}
		lines = append(lines, buf.Bytes())
	}
}

func gzipped(data []byte) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	_, _ = gz.Write(data)
	_ = gz.Close()
	return buf.Bytes()
}

const seedLine = `{"id":"019cecdc-8180-7000-8000-000000000000","seq":1,"aggregate_type":"order","aggregate_id":"1","event_type":"order.created","payload":{"n":1},"headers":{"traceparent":"00-abc"},"dedup_key":"","created_at":"2026-03-14T15:00:00Z","processed_at":"2026-03-14T15:00:01.5Z"}` + "\n"

// FuzzDecodeLines feeds the decoder any NDJSON (gzipped as Keep does):
// it never panics, and what it decodes encodes again to lines that decode
// to the same lines (nothing is lost or invented between Read and Keep).
func FuzzDecodeLines(f *testing.F) {
	f.Add([]byte(seedLine))
	f.Add([]byte(seedLine + seedLine))
	f.Add([]byte(`{"id":"019cecdc-8180-7000-8000-000000000001","payload":null,"created_at":"0001-01-01T00:00:00Z","processed_at":"9999-12-31T23:59:59.999999999+14:00","headers":{"":"\u2028"}}` + "\n"))
	f.Add([]byte(`{"id":"00000000-0000-0000-0000-000000000000","payload":null,"payload_base64":"e29vcHM=","created_at":"9999-12-31T23:59:59.999999999Z","created_at_original":"253402300800.000000000","processed_at":"0000-01-01T00:00:00Z"}` + "\n"))
	f.Add([]byte(`{"id":"019cecdc-8180-7000-8000-000000000002","payload":1,"created_at":"0000-01-01T00:00:00+01:00","processed_at":"9999-12-31T23:59:59-01:00"}` + "\n"))
	f.Add([]byte("{}\n"))
	f.Add([]byte(`{"id":"x"}` + "\n"))
	f.Add([]byte("\n\n"))
	f.Add([]byte(seedLine[:len(seedLine)-1]))
	f.Fuzz(func(t *testing.T, ndjson []byte) {
		lines, err := decodeAll(t, gzipped(ndjson))
		if err != nil {
			return
		}
		again, err := decodeAll(t, gzipped(bytes.Join(lines, nil)))
		if err != nil {
			t.Fatalf("re-encoded lines do not decode: %v\n%s", err, bytes.Join(lines, nil))
		}
		if !bytes.Equal(bytes.Join(lines, nil), bytes.Join(again, nil)) {
			t.Fatalf("decode, encode, decode changed the events:\n%s\n%s", bytes.Join(lines, nil), bytes.Join(again, nil))
		}
	})
}

// FuzzDecodeObject feeds the decoder any bytes as an object: never a
// panic, an error or events.
func FuzzDecodeObject(f *testing.F) {
	f.Add(gzipped([]byte(seedLine)))
	f.Add(append(gzipped([]byte(seedLine)), gzipped([]byte(seedLine))...))
	f.Add([]byte("\x1f\x8b"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, object []byte) {
		_, _ = decodeAll(t, object)
	})
}
