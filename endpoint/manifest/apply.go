package manifest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/internal/printable"
	"github.com/postbox-go/postbox/store"
)

// ErrConflicts is returned by Apply for a plan with conflicts: nothing is
// applied.
var ErrConflicts = errors.New("manifest: the plan has conflicts")

// ErrRefused is returned by Apply for a plan with refusals (it is
// admin.ErrInvalid too): nothing is applied.
var ErrRefused = fmt.Errorf("manifest: the plan has refusals: %w", admin.ErrInvalid)

// Result is what Apply did.
type Result struct {
	// Done are the steps made, in order.
	Done []Done
	// Secrets are the signing secrets Apply generated (webhooks created,
	// or made of a broker's endpoint, without a secret reference): shown
	// once, stored nowhere in clear.
	Secrets []Generated
	// Warnings are admin's (a host that does not resolve now).
	Warnings []string
}

// Done is one step made.
type Done struct {
	Action Action
	Name   string
	ID     uuid.UUID
}

// Generated is a signing secret Create generated for an endpoint.
type Generated struct {
	Name   string
	ID     uuid.UUID
	Secret string
}

// Apply makes p's changes through a, in p's order: it creates endpoints
// (those the file says disabled created disabled, in the same write),
// updates their settings and credentials in one admin.Update each, which
// rotates a signing secret whose reference names another one (the old
// one signing for the plan's grace; a broker's endpoint that becomes a
// webhook gets its secret, or a new one), sets their state, and removes
// those p removes. A plan with conflicts or refusals
// is refused (ErrConflicts, ErrRefused): nothing is applied. Should admin
// refuse a step all the same (the store or a host's addresses changed
// since the plan), Apply stops there, returning what it did beside the
// error: the steps before it are made, and a new plan takes on from
// there. A Plan made after Apply is Empty.
func Apply(ctx context.Context, a *admin.Admin, p *Plan) (Result, error) {
	var r Result
	if len(p.Conflicts) > 0 {
		return r, fmt.Errorf("%w (%d): nothing applied", ErrConflicts, len(p.Conflicts))
	}
	if len(p.Refusals) > 0 {
		return r, fmt.Errorf("%w (%d): nothing applied", ErrRefused, len(p.Refusals))
	}
	for _, s := range p.Steps {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		if err := apply(ctx, a, s, &r); err != nil {
			where := ""
			if s.Line > 0 {
				where = fmt.Sprintf(" (line %d)", s.Line)
			}
			return r, &stepError{text: fmt.Sprintf("%s %s%s: %s", s.Action, printable.String(s.Name), where, s.want.hideURL(err.Error())), err: err}
		}
	}
	return r, nil
}

// stepError is a step's error: its text names the step, and a URL the
// file references as its reference; it unwraps to the error.
type stepError struct {
	text string
	err  error
}

func (e *stepError) Error() string { return e.text }

func (e *stepError) Unwrap() error { return e.err }

// apply makes one step, noting in r what it did.
func apply(ctx context.Context, a *admin.Admin, s Step, r *Result) error {
	switch s.Action {
	case Create:
		state := s.state
		if state == "" {
			state = store.EndpointEnabled
		}
		c, err := a.CreateWithState(ctx, s.want.Settings, credentials(a, s.want), state)
		if err != nil {
			return err
		}
		r.Done = append(r.Done, Done{Action: Create, Name: s.Name, ID: c.Endpoint.ID})
		r.Warnings = append(r.Warnings, c.Warnings...)
		if c.Secret != "" {
			r.Secrets = append(r.Secrets, Generated{Name: s.Name, ID: c.Endpoint.ID, Secret: c.Secret})
		}
	case Update:
		if changes(s.change) {
			u, err := a.Update(ctx, s.ID, s.change)
			if err != nil {
				return err
			}
			r.Warnings = append(r.Warnings, u.Warnings...)
			if u.Secret != "" {
				r.Secrets = append(r.Secrets, Generated{Name: s.Name, ID: s.ID, Secret: u.Secret})
			}
		}
		if s.state != "" {
			if err := a.SetState(ctx, s.ID, s.state); err != nil {
				return err
			}
		}
		r.Done = append(r.Done, Done{Action: Update, Name: s.Name, ID: s.ID})
	case Remove:
		if err := a.Delete(ctx, s.ID); err != nil {
			return err
		}
		r.Done = append(r.Done, Done{Action: Remove, Name: s.Name, ID: s.ID})
	}
	return nil
}

// changes reports whether c changes anything.
func changes(c admin.Change) bool {
	cc := c.Credentials
	return c.Name != nil || c.URL != nil || c.Filter != nil || c.Envelope != nil || c.CESource != nil || c.Signature != nil ||
		c.Types != nil || c.RatePerSecond != nil || c.Concurrency != nil || c.Shadow != nil || c.AllowPrivate != nil ||
		c.Secret != nil || cc.SetHeaders || cc.SetAuth || cc.SetTLS
}

// WriteSecrets writes the generated secrets (Result.Secrets), a line each:
// the endpoint's name (escaped as printable text), a space, the secret
// (which holds no space) — for a file of the operator's, postbox
// endpoints apply --secrets-out.
func (r Result) WriteSecrets(w io.Writer) error {
	var b strings.Builder
	for _, g := range r.Secrets {
		fmt.Fprintf(&b, "%s %s\n", printable.String(g.Name), g.Secret)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// done are the actions as Result.Write tells them.
var done = map[Action]string{Create: "created", Update: "updated", Remove: "removed"}

// Write writes what Apply did for people: a line per step, then each
// generated secret (once: it is stored nowhere in clear), then the
// warnings.
func (r Result) Write(w io.Writer) error {
	var b strings.Builder
	for _, d := range r.Done {
		fmt.Fprintf(&b, "%s %s (%s)\n", done[d.Action], printable.String(d.Name), d.ID)
	}
	for _, g := range r.Secrets {
		fmt.Fprintf(&b, "secret of %s: %s\n(shown once: give it to the receiver, it verifies the signatures with it)\n", printable.String(g.Name), g.Secret)
	}
	for _, warning := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", printable.String(warning))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
