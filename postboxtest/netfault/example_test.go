package netfault_test

import (
	"fmt"
	"io"
	"log"
	"net"
	"time"

	"github.com/postbox-go/postbox/postboxtest/netfault"
)

// A proxy in front of a TCP server: what goes through it can be delayed,
// held in a black hole, reset, left half-open or refused.
func ExampleProxy() {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // an echo server
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()

	p, err := netfault.NewProxy(ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	p.SetBlackHole(true) // a partition: nothing goes through
	_, _ = c.Write([]byte("ping"))
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err = c.Read(make([]byte, 4))
	fmt.Println("in the black hole, timed out:", err != nil)

	p.SetBlackHole(false) // healed: the held bytes go through
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 4)
	_, err = io.ReadFull(c, got)
	fmt.Println("after it:", string(got), err)
	// Output:
	// in the black hole, timed out: true
	// after it: ping <nil>
}
