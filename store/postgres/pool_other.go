//go:build !linux

package postgres

import "syscall"

// setUserTimeout does nothing: TCP_USER_TIMEOUT is Linux's. Keepalives
// still find dead idle connections.
func setUserTimeout(string, string, syscall.RawConn) error { return nil }
