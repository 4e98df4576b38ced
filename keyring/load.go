package keyring

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
)

// EnvVar is the environment variable the postbox command reads its keyring
// from when no key file is given.
const EnvVar = "POSTBOX_SECRETS_KEY"

// maxFileSize bounds what Load reads of a key file: a keyring of many keys
// and comments is a few KiB, and a wrong path (a device, a log) must not be
// read whole.
const maxFileSize = 64 << 10

// Load returns the keyring written (as Parse reads it) in the key file at
// path file when file is not "", otherwise in envValue, the value of
// EnvVar. A file that cannot be read, or larger than 64 KiB, is an error
// naming the path; neither a file nor a value gives ErrNoKey. Load does not
// judge the file's permissions: see FileTooOpen.
func Load(envValue, file string) (*Keyring, error) {
	if file == "" {
		r, err := Parse(envValue)
		if errors.Is(err, ErrNoKey) {
			return nil, fmt.Errorf("%w: set %s or give a key file", err, EnvVar)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvVar, err)
		}
		return r, nil
	}
	text, err := readKeyFile(file)
	if err != nil {
		return nil, err
	}
	r, err := Parse(text)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", file, err)
	}
	return r, nil
}

func readKeyFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		if _, keyErr := ParseKey(path); keyErr == nil {
			// A key given where its file's path was expected: an error
			// quoting the path would show it.
			return "", errors.New("keyring: key file: the path given is a key, not a file's path (give the key in " + EnvVar + ", or write it to a file)")
		}
		return "", fmt.Errorf("keyring: key file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return "", fmt.Errorf("keyring: key file: %w", err)
	}
	if len(b) > maxFileSize {
		return "", fmt.Errorf("keyring: key file %s: larger than %d bytes, not a key file", path, maxFileSize)
	}
	return string(b), nil
}

// FileTooOpen reports whether the file at path may be read or written by
// users other than its owner (any of the permission bits 0o077), which
// deserves a warning: whoever reads the key file reads every sealed secret.
// It reports false when the file cannot be examined (Load reports that) and
// on Windows, whose permission bits do not describe who may read a file.
func FileTooOpen(path string) bool {
	if runtime.GOOS == "windows" {
		return false
	}
	info, err := os.Stat(path)
	return err == nil && info.Mode().Perm()&0o077 != 0
}
