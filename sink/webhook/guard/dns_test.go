package guard_test

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
)

// dnsServer is a tiny DNS server on 127.0.0.1 over UDP that answers every
// A query with the next of its answers (the last one repeated once they
// run out) and every other query with no record: enough for Go's resolver.
type dnsServer struct {
	conn net.PacketConn

	mu       sync.Mutex
	answers  []netip.Addr
	aQueries int
}

func startDNS(t *testing.T, answers ...netip.Addr) *dnsServer {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{conn: conn, answers: answers}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 512)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return // closed
			}
			if resp := s.answer(buf[:n]); resp != nil {
				_, _ = conn.WriteTo(resp, from)
			}
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return s
}

// resolver is a Go resolver that asks only s.
func (s *dnsServer) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.conn.LocalAddr().String())
	}}
}

// queriesA is how many A queries s answered.
func (s *dnsServer) queriesA() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.aQueries
}

// answer returns the response to one query: its header and question, and
// for an A query one answer record.
func (s *dnsServer) answer(q []byte) []byte {
	const headerLen = 12
	end := headerLen
	for end < len(q) && q[end] != 0 { // the question's name, label by label
		end += int(q[end]) + 1
	}
	end += 5 // the name's final zero, type and class
	if len(q) < headerLen || end > len(q) || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[end-4 : end-2])

	resp := make([]byte, 0, end+16)
	resp = append(resp, q[0:2]...)              // id
	resp = append(resp, 0x80|q[2]&0x01, 0x80)   // response, recursion desired as asked, recursion available, no error
	resp = append(resp, 0, 1, 0, 0, 0, 0, 0, 0) // 1 question, answers set below, no other records
	resp = append(resp, q[headerLen:end]...)    // the question
	if qtype != 1 {                             // not A: no record
		return resp
	}
	s.mu.Lock()
	addr := s.answers[min(s.aQueries, len(s.answers)-1)]
	s.aQueries++
	s.mu.Unlock()
	resp[7] = 1                                       // 1 answer
	resp = append(resp, 0xc0, headerLen)              // the question's name
	resp = append(resp, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4) // A, IN, TTL 0, 4 bytes
	a4 := addr.As4()
	return append(resp, a4[:]...)
}
