package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// DeadLetters is what dead-letter tools call (postbox failed, a console):
// list failed events, group them by error, send them back to the queue
// (retry) or delete them (purge). Every Outbox has these methods.
//
// It is an interface of its own, apart from Inspector, because it writes:
// a health check or a status page given an Inspector must not be able to
// retry or purge anything.
//
// FailedRetry and FailedPurge work in batches of at most BatchSize rows,
// each its own statement and transaction, so that no statement locks more
// than FailedBatchMax rows however many events failed. A batch either
// commits whole or not at all; cancelling ctx stops the work after the batch
// in flight (its statement is not interrupted), and the same call made again
// carries on with what is left: both are idempotent.
type DeadLetters interface {
	// FailedList returns one page of failed events, the most recent
	// failure first, and the cursor of the next page.
	FailedList(ctx context.Context, p FailedListParams) (FailedPage, error)
	// FailedGroups groups the most recent failed events (at most p.Scan)
	// by the fingerprint of their last error (ErrorFingerprint).
	FailedGroups(ctx context.Context, p FailedGroupsParams) (FailedGroups, error)
	// FailedRetry sends the failed events p selects back to the queue, due
	// at once, as if they had never been attempted: a relay claims each
	// again as attempt 1, with all its attempts ahead of it. Their
	// LastError is kept until an attempt ends (it is the error of their
	// last failure; a new failure replaces it, a delivery clears or deletes
	// it). It returns how many events it sent back, also when it stops
	// early (an error, ctx cancelled).
	FailedRetry(ctx context.Context, p FailedRetryParams) (int, error)
	// FailedPurge deletes the failed events p selects and returns how many
	// it deleted, also when it stops early.
	FailedPurge(ctx context.Context, p FailedPurgeParams) (int, error)
}

// Limits of the dead-letter operations.
const (
	// FailedBatchMax is the largest batch of FailedRetry and FailedPurge,
	// and their BatchSize when zero: the most rows one statement changes.
	FailedBatchMax = 10_000
	// FailedListLimitDefault is FailedListParams.Limit when zero.
	FailedListLimitDefault = 100
	// FailedListLimitMax is the largest FailedListParams.Limit.
	FailedListLimitMax = 10_000
	// FailedGroupsScanDefault is FailedGroupsParams.Scan when zero.
	FailedGroupsScanDefault = 100_000
	// FailedGroupsScanMax is the largest FailedGroupsParams.Scan.
	FailedGroupsScanMax = 1_000_000
)

// FailedFilter narrows the failed events listed, grouped, retried or
// purged; its zero value lets every failed event of the outbox through.
type FailedFilter struct {
	// Endpoint, when not zero, turns the dead-letter operations to the
	// failed deliveries of this webhook endpoint (endpoints mode) instead
	// of the outbox's failed events; AnyEndpoint turns them to those of
	// every endpoint. It is where to look, not a filter: a selection with
	// only Endpoint set still selects nothing (FailedSelection.IsZero).
	// The other fields apply to the deliveries' copies of the events, and
	// Record.Endpoint names each delivery's endpoint.
	Endpoint uuid.UUID
	// EventType keeps the events of this type only.
	EventType string
	// FailedSince keeps the events that failed at or after this time.
	FailedSince time.Time
	// FailedBefore keeps the events that failed before this time (older
	// than a duration: time.Now().Add(-d)).
	FailedBefore time.Time
	// AggregateType keeps the events of this aggregate type.
	AggregateType string
	// AggregateID keeps the events of this aggregate id.
	AggregateID string
	// ErrorContains keeps the events whose last error contains this text
	// (compared as written: case matters). The lists find such events by
	// reading the failed events in order, so a text that few of them hold
	// costs a scan of them all.
	ErrorContains string
}

// AnyEndpoint is the FailedFilter.Endpoint of every endpoint's failed
// deliveries.
var AnyEndpoint = uuid.Max

// IsZero reports whether f lets every failed event (or delivery) of where
// it looks (Endpoint) through.
func (f FailedFilter) IsZero() bool {
	return f == FailedFilter{Endpoint: f.Endpoint}
}

// FailedCursor is a place in the list of failed events, which is ordered
// by failure time (ProcessedAt), then OutboxSeq, most recent first. A page
// holds the events after its cursor; events that fail later come before the
// first page, so paging on never shows an event twice nor skips one that
// stays failed.
type FailedCursor struct {
	ProcessedAt time.Time
	OutboxSeq   int64
}

// IsZero reports whether c is the start of the list.
func (c FailedCursor) IsZero() bool { return c.ProcessedAt.IsZero() && c.OutboxSeq == 0 }

// String encodes c for a URL or a command line: "<unix microseconds>.<seq>";
// the start of the list is "".
func (c FailedCursor) String() string {
	if c.IsZero() {
		return ""
	}
	return strconv.FormatInt(c.ProcessedAt.UnixMicro(), 10) + "." + strconv.FormatInt(c.OutboxSeq, 10)
}

// ParseFailedCursor reads what FailedCursor.String wrote.
func ParseFailedCursor(s string) (FailedCursor, error) {
	if s == "" {
		return FailedCursor{}, nil
	}
	at, seq, ok := strings.Cut(s, ".")
	micros, err1 := strconv.ParseInt(at, 10, 64)
	n, err2 := strconv.ParseInt(seq, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return FailedCursor{}, fmt.Errorf("store: cursor %q: want <unix microseconds>.<seq>", s)
	}
	return FailedCursor{ProcessedAt: time.UnixMicro(micros), OutboxSeq: n}, nil
}

// FailedListParams selects a page of failed events.
type FailedListParams struct {
	FailedFilter
	// After is the cursor of the page before (FailedPage.Next); zero for
	// the first page.
	After FailedCursor
	// Limit is the size of the page (FailedListLimitDefault when zero, at
	// most FailedListLimitMax).
	Limit int
}

// FailedPage is one page of failed events.
type FailedPage struct {
	// Events are the page's events, most recent failure first; their
	// Status is StatusFailed and ProcessedAt when they failed.
	Events []Record
	// Next is the cursor of the next page; zero when this page is the
	// last.
	Next FailedCursor
}

// FailedGroupsParams chooses the failed events FailedGroups reads.
type FailedGroupsParams struct {
	FailedFilter
	// Scan bounds the events read, the most recent failures first
	// (FailedGroupsScanDefault when zero, at most FailedGroupsScanMax): the
	// cost of grouping stays bounded however many events failed.
	Scan int
}

// FailedGroups is the answer of FailedGroups.
type FailedGroups struct {
	// Groups are the groups found, the largest first (then the most
	// recently seen).
	Groups []FailureGroup
	// Scanned is how many failed events were read.
	Scanned int
	// Complete is false when more failed events (matching the filter)
	// than Scanned exist: the counts are then those of the most recent
	// ones.
	Complete bool
}

// FailureGroup is the failed events whose last errors share a fingerprint.
type FailureGroup struct {
	// ID names the group in FailedSelection.Group (ErrorGroupID of the
	// fingerprint).
	ID string `json:"id"`
	// Fingerprint is the errors' common text (ErrorFingerprint).
	Fingerprint string `json:"fingerprint"`
	// Example is the most recent full error text of the group.
	Example string `json:"example"`
	// Count is how many of the scanned events are in the group.
	Count int `json:"count"`
	// FirstSeen and LastSeen are the earliest and the latest failure
	// times (ProcessedAt) in the group.
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
}

// FailedSelection chooses the failed events FailedRetry or FailedPurge
// changes. Every field set narrows the selection (they combine with AND);
// a selection with no field set selects nothing and is refused
// (ErrEmptySelection): set All to mean every failed event.
type FailedSelection struct {
	FailedFilter
	// All selects every failed event (that the other fields let through).
	All bool
	// IDs selects these events (those of them that are failed).
	IDs []uuid.UUID
	// Group selects the events whose last error has this group id
	// (FailureGroup.ID). Every failed event is read, in batches, to find
	// them.
	Group string
}

// IsZero reports whether s selects nothing (no field set).
func (s FailedSelection) IsZero() bool {
	return s.FailedFilter.IsZero() && !s.All && len(s.IDs) == 0 && s.Group == ""
}

// ErrEmptySelection is returned by FailedRetry and FailedPurge for a
// FailedSelection with no field set.
var ErrEmptySelection = errors.New("store: no failed events selected: set All, IDs, Group or a filter")

// FailedRetryParams says which failed events FailedRetry sends back, and
// how.
type FailedRetryParams struct {
	FailedSelection
	// BatchSize is the most events one statement changes
	// (FailedBatchMax when zero, at most FailedBatchMax).
	BatchSize int
	// Progress, when not nil, is called after each batch that sent
	// events back, with the number sent back so far.
	Progress func(done int)
}

// FailedPurgeParams says which failed events FailedPurge deletes, and how.
type FailedPurgeParams struct {
	FailedSelection
	// BatchSize is the most events one statement deletes
	// (FailedBatchMax when zero, at most FailedBatchMax).
	BatchSize int
	// Progress, when not nil, is called after each batch that deleted
	// events, with the number deleted so far.
	Progress func(done int)
}

// fingerprintMax bounds, in bytes, an error fingerprint.
const fingerprintMax = 200

var (
	uuidText   = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	timeText   = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?`)
	hexPrefix  = regexp.MustCompile(`(?i)\b0x[0-9a-f]+\b`)
	wordText   = regexp.MustCompile(`\b[0-9A-Za-z]+\b`)
	numberText = regexp.MustCompile(`\b\d+(?:[.,]\d+)*`)
	spaceText  = regexp.MustCompile(`\s+`)
)

// hexWord reports whether w is a hex string of at least 8 digits that
// holds a letter a to f and a decimal digit: a hash, a random suffix, a
// trace id (words made of the letters a to f alone stay).
func hexWord(w string) bool {
	if len(w) < 8 {
		return false
	}
	digit, letter := false, false
	for _, c := range strings.ToLower(w) {
		switch {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'f':
			letter = true
		default:
			return false
		}
	}
	return digit && letter
}

// ErrorFingerprint returns what failures of one kind have in common: the
// error text with its variable parts replaced, UUIDs by "<uuid>",
// timestamps by "<time>", hex strings (0x..., or of 8 digits or more with
// a digit and a letter) by "<hex>", numbers by "N"; runs of white space
// become one space, and the result is cut to 200 bytes. "status 503:
// upstream 10.0.0.7 timed out after 30s" becomes "status N: upstream N
// timed out after Ns". It is computed in Go, one implementation for every
// store, so that a group id means the same everywhere.
func ErrorFingerprint(errText string) string {
	s := uuidText.ReplaceAllString(errText, "<uuid>")
	s = timeText.ReplaceAllString(s, "<time>")
	s = hexPrefix.ReplaceAllString(s, "<hex>")
	s = wordText.ReplaceAllStringFunc(s, func(w string) string {
		if hexWord(w) {
			return "<hex>"
		}
		return w
	})
	s = numberText.ReplaceAllString(s, "N")
	s = strings.TrimSpace(spaceText.ReplaceAllString(s, " "))
	if len(s) > fingerprintMax {
		n := fingerprintMax
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}

// ErrorGroupID names the group of a fingerprint: the first 12 hex digits of
// its SHA-256. It stays the same as long as ErrorFingerprint does.
func ErrorGroupID(fingerprint string) string {
	sum := sha256.Sum256([]byte(fingerprint))
	return hex.EncodeToString(sum[:6])
}

// ValidGroupID reports whether id has the form of an ErrorGroupID.
func ValidGroupID(id string) bool {
	if len(id) != 12 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}
