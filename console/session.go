package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// Defaults of the session lifetimes.
const (
	// SessionIdleDefault is Config.SessionIdle when zero.
	SessionIdleDefault = time.Hour
	// SessionMaxDefault is Config.SessionMax when zero.
	SessionMaxDefault = 12 * time.Hour
	// sessionsMax bounds the sessions kept: a new one past it ends the
	// oldest.
	sessionsMax = 10_000
)

// sessions are the console's logged-in browsers, in memory: a restart
// ends them all. A cookie holds a random id; the table keys its hash, so
// the cookie's value is never compared byte by byte.
type sessions struct {
	mu       sync.Mutex
	idle     time.Duration
	lifetime time.Duration
	byID     map[[sha256.Size]byte]*session
}

type session struct {
	created, seen time.Time
}

func newSessions(idle, lifetime time.Duration) *sessions {
	return &sessions{idle: idle, lifetime: lifetime, byID: map[[sha256.Size]byte]*session{}}
}

// create starts a session and returns its cookie value.
func (s *sessions) create(now time.Time) string {
	var id [32]byte
	rand.Read(id[:]) // never fails (crypto/rand)
	cookie := hex.EncodeToString(id[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= sessionsMax {
		s.prune(now)
	}
	if len(s.byID) >= sessionsMax {
		s.dropOldest()
	}
	s.byID[sha256.Sum256([]byte(cookie))] = &session{created: now, seen: now}
	return cookie
}

// valid reports whether cookie names a live session; touch counts the
// request as use (it restarts the idle time). An expired session is
// dropped.
func (s *sessions) valid(cookie string, now time.Time, touch bool) bool {
	key := sha256.Sum256([]byte(cookie))
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.byID[key]
	if x == nil {
		return false
	}
	if s.expired(x, now) {
		delete(s.byID, key)
		return false
	}
	if touch {
		x.seen = now
	}
	return true
}

// revoke ends the session of cookie (logout).
func (s *sessions) revoke(cookie string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, sha256.Sum256([]byte(cookie)))
}

func (s *sessions) expired(x *session, now time.Time) bool {
	return now.Sub(x.seen) >= s.idle || now.Sub(x.created) >= s.lifetime
}

func (s *sessions) prune(now time.Time) {
	for key, x := range s.byID {
		if s.expired(x, now) {
			delete(s.byID, key)
		}
	}
}

func (s *sessions) dropOldest() {
	var oldest [sha256.Size]byte
	var at time.Time
	for key, x := range s.byID {
		if at.IsZero() || x.created.Before(at) {
			oldest, at = key, x.created
		}
	}
	delete(s.byID, oldest)
}
