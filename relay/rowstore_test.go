package relay_test

import (
	"context"
	"sync"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// rowStore is a real store seen through what issue 23 added to the store
// contract, for tests that must pass whether the store underneath
// implements it yet or not:
//   - the claims of the events in unreadable return them as a store that
//     cannot read their row does (ClaimedEvent.Invalid set, every field but
//     ID, OutboxSeq and Lease zero);
//   - with boundBytes, a claim takes no more payload bytes than its
//     ClaimParams.MaxBytes (but at least one event), the rest being
//     released at once, as a store that bounds claims by bytes would not
//     have taken them;
//   - with streamOnly, the relay's own claims find nothing (only a test
//     stream's claims, through claimStreamed, take events);
//   - claimHook, when set, runs before each claim and fails it when it
//     returns an error; settleHook runs before each settle.
//
// It records the parameters of every claim and settle.
type rowStore struct {
	store.Outbox
	boundBytes bool
	streamOnly bool
	claimHook  func(context.Context, store.ClaimParams) error
	settleHook func(store.SettleParams)

	mu         sync.Mutex
	unreadable map[uuid.UUID]string
	claims     []store.ClaimParams
	settles    []store.SettleParams
	// held is the payload bytes claimed and not settled, and maxHeld
	// its peak.
	held, maxHeld int64
	sizes         map[uuid.UUID]int64
}

func newRowStore(s store.Outbox) *rowStore {
	return &rowStore{Outbox: s, unreadable: map[uuid.UUID]string{}, sizes: map[uuid.UUID]int64{}}
}

// markUnreadable makes the claims of id return it as a row the store
// could not read, for the reason why.
func (s *rowStore) markUnreadable(id uuid.UUID, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unreadable[id] = why
}

func (s *rowStore) Claim(ctx context.Context, p store.ClaimParams) ([]store.ClaimedEvent, error) {
	if s.streamOnly {
		s.record(p)
		return nil, nil
	}
	return s.claimStreamed(ctx, p)
}

// claimStreamed is Claim, for a test stream too.
func (s *rowStore) claimStreamed(ctx context.Context, p store.ClaimParams) ([]store.ClaimedEvent, error) {
	s.record(p)
	if s.claimHook != nil {
		if err := s.claimHook(ctx, p); err != nil {
			return nil, err
		}
	}
	claim := s.Outbox.Claim
	if s.boundBytes && p.MaxBytes > 0 {
		claim = s.bounded
	}
	batch, err := claim(ctx, p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, d := range batch {
		s.sizes[d.ID] = int64(len(d.Payload))
		s.held += int64(len(d.Payload))
		if why, ok := s.unreadable[d.ID]; ok {
			batch[i] = store.ClaimedEvent{OutboxSeq: d.OutboxSeq, Lease: d.Lease, Invalid: why}
			batch[i].ID = d.ID
		}
	}
	s.maxHeld = max(s.maxHeld, s.held)
	return batch, nil
}

// bounded claims as p asks, p.MaxBytes included, through claims of one
// event each: it stops before the event that would take the payloads past
// p.MaxBytes (but takes one at least), which it releases.
func (s *rowStore) bounded(ctx context.Context, p store.ClaimParams) ([]store.ClaimedEvent, error) {
	var batch []store.ClaimedEvent
	total := int64(0)
	one := p
	one.Limit = 1
	for len(batch) < p.Limit {
		got, err := s.Outbox.Claim(ctx, one)
		switch {
		case err != nil && len(batch) == 0:
			return nil, err
		case err != nil, len(got) == 0:
			return batch, nil
		}
		d := got[0]
		if len(batch) > 0 && total+int64(len(d.Payload)) > p.MaxBytes {
			return batch, s.Outbox.Release(ctx, p.Owner, []uuid.UUID{d.ID})
		}
		batch = append(batch, d)
		total += int64(len(d.Payload))
		if !p.Ordered {
			one.After = store.PositionOf(d)
		}
	}
	return batch, nil
}

func (s *rowStore) record(p store.ClaimParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims = append(s.claims, p)
}

func (s *rowStore) Settle(ctx context.Context, p store.SettleParams) error {
	if s.settleHook != nil {
		s.settleHook(p)
	}
	err := s.Outbox.Settle(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settles = append(s.settles, p)
	if err == nil {
		for _, id := range p.Done {
			s.settled(id)
		}
		for _, r := range p.Retry {
			s.settled(r.ID)
		}
		for _, f := range p.Failed {
			s.settled(f.ID)
		}
		for _, r := range p.Release {
			s.settled(r.ID)
		}
	}
	return err
}

// settled forgets the bytes of id; s.mu is held.
func (s *rowStore) settled(id uuid.UUID) {
	s.held -= s.sizes[id]
	delete(s.sizes, id)
}

// claimsSeen and settlesSeen return the parameters recorded so far.
func (s *rowStore) claimsSeen() []store.ClaimParams {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]store.ClaimParams(nil), s.claims...)
}

func (s *rowStore) settlesSeen() []store.SettleParams {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]store.SettleParams(nil), s.settles...)
}

// peakHeld is the most payload bytes claimed and not yet settled at once.
func (s *rowStore) peakHeld() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxHeld
}
