package relay

import (
	"context"
	"time"

	"github.com/postbox-go/postbox/store"
)

// flowBatch is the claim size that shows events flowing at once (a few
// events committed together are not yet a flow).
const flowBatch = 4

// dozeTries is how many dozes in a row may find producers committing before
// the relay stops dozing and backs off (2 ms, then doubling up to 64 ms).
const dozeTries = 2

// dozeStuckWarning is the number of failed dozes in a row (about 10 s of
// them) after which the relay warns that it cannot doze.
const dozeStuckWarning = 160

// dozeState is where the relay stands in the doze protocol: whether
// producers notify it, and whether it may wait for their notifications.
type dozeState int

const (
	// awake: producers do not notify the relay; it looks for events on
	// its own. A new listening connection starts here.
	awake dozeState = iota
	// awakeInFlow: the relay stopped dozing because events flow; an empty
	// claim is first taken for a gap between commits.
	awakeInFlow
	// dozing: producers notify the relay (Dozer.Doze was called), but it
	// has not confirmed that no producer that missed the mark is still
	// committing: it may not wait for notifications yet.
	dozing
	// dozingConfirmed: producers notify the relay, and Dozer.Doze reported
	// that every producer that did not is done: if the claim that follows
	// finds nothing, nothing was missed, and the relay waits.
	dozingConfirmed
)

// doze is the claim loop's side of store.Dozer. Producers notify a relay
// only while it dozes: a relay that keeps finding events claims on its own
// and costs them no NOTIFY; a relay that waits is notified at the next
// commit. The claim loop tells it what each claim found, and it decides
// what comes next; the transitions:
//
//   - An empty claim while awake or dozing calls Doze. Ready: the relay is
//     dozingConfirmed and claims once more at once (that claim sees the
//     events of the producers that committed without notifying). Not
//     ready, a producer that missed the mark is committing: the relay is
//     dozing and looks again after lingerDelay, sooner if notified; from
//     the dozeTries-th such Doze in a row it calls Wake (back to awake:
//     producers keep committing, and each notifying commit would take its
//     turn) and backs off, doubling up to 64 ms. A Doze that fails (the
//     listening connection is down) changes nothing: the relay waits.
//   - An empty claim while dozingConfirmed: the relay waits for a
//     notification, a due retry or the poll; it is dozing again after (the
//     next empty claim checks again before waiting).
//   - A claim that finds events while dozingConfirmed makes it dozing.
//     From the second claim in a row that finds events, or one that finds
//     flowBatch, a dozing relay calls Wake: awakeInFlow.
//   - An empty claim while awakeInFlow: the relay looks once more after
//     lingerDelay, without a notification to end the wait, and is awake.
//   - A new listening connection (or none) starts awake.
//
// Wake failing leaves the relay dozing: producers keep notifying it.
type doze struct {
	dozer store.Dozer
	state dozeState
	// claimsWithEvents counts the claims in a row that found events.
	claimsWithEvents int
	// dozesNotReady counts the dozes in a row that found a producer that
	// missed the mark still committing.
	dozesNotReady int
}

// afterEmpty is what the claim loop does after a claim that found nothing.
type afterEmpty int

const (
	// lookAgainSoon: events were flowing, and one empty claim is a gap
	// between commits more often than the end of the flow: claim again
	// after lingerDelay.
	lookAgainSoon afterEmpty = iota
	// claimOnceMore: dozing is confirmed; claim again at once to see what
	// the producers that did not notify committed.
	claimOnceMore
	// backOffWhileCommitting: producers that missed the mark are still
	// committing, and their events come soon: claim again after
	// notReadyDelay, sooner if notified while dozing.
	backOffWhileCommitting
	// waitForWakeUp: wait for a notification, a due retry or the poll.
	waitForWakeUp
)

// follow follows the listening connection: a new one, or none, starts
// awake.
func (d *doze) follow(current *store.Dozer) {
	var dz store.Dozer
	if current != nil {
		dz = *current
	}
	if dz != d.dozer {
		*d = doze{dozer: dz}
	}
}

// producersNotify reports whether producers may be notifying the relay, so
// that a notification may end its short waits.
func (d *doze) producersNotify() bool {
	return d.state == dozing || d.state == dozingConfirmed
}

// foundEvents records a claim that found n events, and wakes a dozing
// relay when they flow: from the second such claim in a row, or one that
// found flowBatch.
func (d *doze) foundEvents(ctx context.Context, n int) {
	d.dozesNotReady = 0
	d.claimsWithEvents++
	if d.state == dozingConfirmed {
		d.state = dozing
	}
	flowing := d.claimsWithEvents >= 2 || n >= flowBatch
	if flowing && d.state == dozing && d.dozer.Wake(ctx) == nil {
		d.state = awakeInFlow
	}
}

// afterEmptyClaim records a claim that found nothing and decides what the
// claim loop does next; it dozes when that is the next step.
func (d *doze) afterEmptyClaim(ctx context.Context) afterEmpty {
	d.claimsWithEvents = 0
	switch {
	case d.state == awakeInFlow:
		d.state = awake
		return lookAgainSoon
	case d.state == dozingConfirmed:
		d.state = dozing
		return waitForWakeUp
	case d.dozer == nil:
		return waitForWakeUp // producers always notify, or none can
	}
	ready, err := d.dozer.Doze(ctx)
	switch {
	case err != nil:
		// Not listening: poll until the listener is back.
		return waitForWakeUp
	case !ready:
		d.state = dozing
		d.dozesNotReady++
		// Producers keep committing: every one notifies a dozing relay,
		// and notifying commits take turns. After a second try the relay
		// stops dozing and looks for their events on its own.
		if d.dozesNotReady >= dozeTries && d.dozer.Wake(ctx) == nil {
			d.state = awake
		}
		return backOffWhileCommitting
	}
	d.state = dozingConfirmed
	d.dozesNotReady = 0
	return claimOnceMore
}

// notReadyDelay is how long the relay waits after a doze that found
// producers committing: lingerDelay, doubling after dozeTries of them in
// a row, up to 32 times as long.
func (d *doze) notReadyDelay() time.Duration {
	return lingerDelay << max(0, min(d.dozesNotReady-dozeTries, 5))
}

// stuck reports whether the dozes have just found producers committing
// for dozeStuckWarning times in a row (about 10 s of them).
func (d *doze) stuck() bool { return d.dozesNotReady == dozeStuckWarning }
