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
//     cannot read their row does (Delivery.Invalid set, every field but
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

func (s *rowStore) Claim(ctx context.Context, p store.ClaimParams) ([]store.Delivery, error) {
	if s.streamOnly {
		s.record(p)
		return nil, nil
	}
	return s.claimStreamed(ctx, p)
}

// claimStreamed is Claim, for a test stream too.
func (s *rowStore) claimStreamed(ctx context.Context, p store.ClaimParams) ([]store.Delivery, error) {
	s.record(p)
	if s.claimHook != nil {
		if err := s.claimHook(ctx, p); err != nil {
			return nil, err
		}
	}
	batch, err := s.Outbox.Claim(ctx, p)
	if err != nil {
		return nil, err
	}
	if s.boundBytes && p.MaxBytes > 0 {
		if batch, err = s.bound(ctx, p, batch); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, d := range batch {
		s.sizes[d.ID] = int64(len(d.Payload))
		s.held += int64(len(d.Payload))
		if why, ok := s.unreadable[d.ID]; ok {
			batch[i] = store.Delivery{OutboxSeq: d.OutboxSeq, Lease: d.Lease, Invalid: why}
			batch[i].ID = d.ID
		}
	}
	s.maxHeld = max(s.maxHeld, s.held)
	return batch, nil
}

// bound keeps the events of batch that fit in p.MaxBytes (at least one)
// and releases the others.
func (s *rowStore) bound(ctx context.Context, p store.ClaimParams, batch []store.Delivery) ([]store.Delivery, error) {
	n, total := 0, int64(0)
	for n < len(batch) && (n == 0 || total+int64(len(batch[n].Payload)) <= p.MaxBytes) {
		total += int64(len(batch[n].Payload))
		n++
	}
	if n == len(batch) {
		return batch, nil
	}
	var extra []uuid.UUID
	for _, d := range batch[n:] {
		extra = append(extra, d.ID)
	}
	if err := s.Outbox.Release(ctx, p.Owner, extra); err != nil {
		return nil, err
	}
	return batch[:n], nil
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
