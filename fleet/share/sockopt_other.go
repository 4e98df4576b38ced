//go:build !linux

package share

import "syscall"

// setUserTimeout sets nothing: TCP_USER_TIMEOUT is Linux's.
func setUserTimeout(string, string, syscall.RawConn) error { return nil }
