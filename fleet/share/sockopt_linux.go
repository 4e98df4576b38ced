package share

import (
	"strings"
	"syscall"
)

// tcpUserTimeout is Linux's TCP_USER_TIMEOUT socket option (package
// syscall does not name it).
const tcpUserTimeout = 0x12

// setUserTimeout is the dialer's Control: a TCP connection whose sent data
// stays unacknowledged for userTimeout is dropped.
func setUserTimeout(network, _ string, c syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil
	}
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(userTimeout.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
