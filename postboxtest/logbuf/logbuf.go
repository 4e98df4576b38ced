// Package logbuf holds a logger's output for tests that read it while the
// logger (or a child process) goes on writing.
package logbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that one writer and concurrent readers may use
// at once. The zero value is ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
