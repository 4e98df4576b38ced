package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// apiNotFound and apiAmbiguous are apiPlace's refusals of an endpoint.
var (
	apiNotFound  = errors.New("no such endpoint")
	apiAmbiguous = errors.New("several endpoints have this name: give the id")
)

// apiPlace reads where the dead-letter operations work: "" the outbox
// (uuid.Nil), "all" every endpoint (store.AnyEndpoint), else one
// endpoint, by id or by a name only it has. It returns the endpoints'
// names by id as well.
func (c *Console) apiPlace(ctx context.Context, ref string) (uuid.UUID, map[uuid.UUID]string, error) {
	eps, err := c.cfg.Store.EndpointList(ctx)
	if err != nil {
		return uuid.Nil, nil, err
	}
	names := endpointNames(eps)
	switch ref {
	case "":
		return uuid.Nil, names, nil
	case endpointAll:
		return store.AnyEndpoint, names, nil
	}
	if id, err := uuid.Parse(ref); err == nil {
		if _, ok := names[id]; ok {
			return id, names, nil
		}
	}
	found := uuid.Nil
	for _, e := range eps {
		if e.Name != ref {
			continue
		}
		if found != uuid.Nil {
			return uuid.Nil, nil, apiAmbiguous
		}
		found = e.ID
	}
	if found == uuid.Nil {
		return uuid.Nil, nil, apiNotFound
	}
	return found, names, nil
}

// apiPlaceFail answers an error of apiPlace.
func (c *Console) apiPlaceFail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, apiNotFound):
		c.apiProblem(w, http.StatusNotFound, problemNotFound, "endpoint: "+err.Error())
	case errors.Is(err, apiAmbiguous):
		c.apiProblem(w, http.StatusConflict, problemAmbiguous, "endpoint: "+err.Error())
	default:
		c.apiFail(w, "listing the endpoints", err)
	}
}

// apiFilter is a filter of dead letters as the query and the bodies give
// it; FailedSince and FailedBefore are RFC 3339 times.
type apiFilter struct {
	Endpoint      string `json:"endpoint"`
	Type          string `json:"type"`
	AggregateType string `json:"aggregate_type"`
	AggregateID   string `json:"aggregate_id"`
	Error         string `json:"error"`
	FailedSince   string `json:"failed_since"`
	FailedBefore  string `json:"failed_before"`
}

// apiQueryFilter reads the filter of a query.
func apiQueryFilter(q url.Values) apiFilter {
	return apiFilter{
		Endpoint: q.Get("endpoint"), Type: q.Get("type"), AggregateType: q.Get("aggregate_type"), AggregateID: q.Get("aggregate_id"),
		Error: q.Get("error"), FailedSince: q.Get("failed_since"), FailedBefore: q.Get("failed_before"),
	}
}

// store turns f into the store's filter; Endpoint is the caller's
// (apiPlace).
func (f apiFilter) store(where uuid.UUID) (store.FailedFilter, error) {
	out := store.FailedFilter{Endpoint: where, EventType: f.Type, AggregateType: f.AggregateType, AggregateID: f.AggregateID, ErrorContains: f.Error}
	for _, t := range []struct {
		name, text string
		dst        *time.Time
	}{{"failed_since", f.FailedSince, &out.FailedSince}, {"failed_before", f.FailedBefore, &out.FailedBefore}} {
		if t.text == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, t.text)
		if err != nil {
			return out, fmt.Errorf("%s: want an RFC 3339 time, such as 2026-03-01T12:00:00Z", t.name)
		}
		*t.dst = at
	}
	return out, nil
}

// apiDeadLetter is one dead letter: a failed event of the outbox, or an
// endpoint's failed delivery (Endpoint set), as postbox failed list
// --json prints it.
type apiDeadLetter struct {
	ID            uuid.UUID         `json:"id"`
	Endpoint      *uuid.UUID        `json:"endpoint,omitempty"`
	EndpointName  string            `json:"endpoint_name,omitempty"`
	Status        string            `json:"status"`
	EventType     string            `json:"event_type"`
	AggregateType string            `json:"aggregate_type"`
	AggregateID   string            `json:"aggregate_id"`
	DedupKey      string            `json:"dedup_key,omitempty"`
	Attempts      int               `json:"attempts"`
	LastError     string            `json:"last_error"`
	CreatedAt     time.Time         `json:"created_at"`
	FailedAt      *time.Time        `json:"failed_at,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	// Payload is the event's JSON payload as stored; a payload that is
	// not JSON is a JSON string of its bytes.
	Payload json.RawMessage `json:"payload"`
}

func apiDeadLetterOf(r store.Record, names map[uuid.UUID]string) apiDeadLetter {
	d := apiDeadLetter{
		ID: r.ID, Status: r.Status, EventType: r.EventType, AggregateType: r.AggregateType, AggregateID: r.AggregateID,
		DedupKey: r.DedupKey, Attempts: r.Attempts, LastError: r.LastError, CreatedAt: r.CreatedAt.UTC(), Headers: r.Headers,
		Payload: r.Payload,
	}
	if !json.Valid(d.Payload) {
		d.Payload, _ = json.Marshal(string(r.Payload))
	}
	if !r.ProcessedAt.IsZero() {
		at := r.ProcessedAt.UTC()
		d.FailedAt = &at
	}
	if r.Endpoint != uuid.Nil {
		id := r.Endpoint
		d.Endpoint, d.EndpointName = &id, names[id]
	}
	return d
}

// apiDeadLetterPage is the answer of GET /api/dead-letters.
type apiDeadLetterPage struct {
	Events []apiDeadLetter `json:"events"`
	// Next is the cursor of the next page (the query's after); absent on
	// the last page.
	Next string `json:"next,omitempty"`
}

// apiReadFilter reads the query's filter and where it looks, or answers a
// problem and reports false.
func (c *Console) apiReadFilter(ctx context.Context, w http.ResponseWriter, f apiFilter) (store.FailedFilter, map[uuid.UUID]string, bool) {
	where, names, err := c.apiPlace(ctx, f.Endpoint)
	if err != nil {
		c.apiPlaceFail(w, err)
		return store.FailedFilter{}, nil, false
	}
	filter, err := f.store(where)
	if err != nil {
		c.apiProblem(w, http.StatusBadRequest, problemBadRequest, err.Error())
		return store.FailedFilter{}, nil, false
	}
	return filter, names, true
}

func (c *Console) apiDeadLetterList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := c.apiLimit(w, r, store.FailedListLimitDefault, store.FailedListLimitMax)
	if !ok {
		return
	}
	after, err := store.ParseFailedCursor(q.Get("after"))
	if err != nil {
		c.apiProblem(w, http.StatusBadRequest, problemBadRequest, "after: want the next of the page before")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	filter, names, ok := c.apiReadFilter(ctx, w, apiQueryFilter(q))
	if !ok {
		return
	}
	page, err := c.cfg.Store.FailedList(ctx, store.FailedListParams{FailedFilter: filter, After: after, Limit: limit})
	if err != nil {
		c.apiFail(w, "listing dead letters", err)
		return
	}
	out := apiDeadLetterPage{Events: make([]apiDeadLetter, len(page.Events)), Next: page.Next.String()}
	for i, rec := range page.Events {
		out.Events[i] = apiDeadLetterOf(rec, names)
	}
	c.apiJSON(w, http.StatusOK, out)
}

// apiGroups is the answer of GET /api/dead-letters/groups.
type apiGroups struct {
	Groups   []store.FailureGroup `json:"groups"`
	Scanned  int                  `json:"scanned"`
	Complete bool                 `json:"complete"`
}

func (c *Console) apiDeadLetterGroups(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	scan := store.FailedGroupsScanDefault
	if s := q.Get("scan"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > store.FailedGroupsScanMax {
			c.apiProblem(w, http.StatusBadRequest, problemBadRequest, fmt.Sprintf("scan: want 1 to %d", store.FailedGroupsScanMax))
			return
		}
		scan = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	filter, _, ok := c.apiReadFilter(ctx, w, apiQueryFilter(q))
	if !ok {
		return
	}
	g, err := c.cfg.Store.FailedGroups(ctx, store.FailedGroupsParams{FailedFilter: filter, Scan: scan})
	if err != nil {
		c.apiFail(w, "grouping dead letters", err)
		return
	}
	c.apiJSON(w, http.StatusOK, apiGroups{Groups: nonNil(g.Groups), Scanned: g.Scanned, Complete: g.Complete})
}

// apiSelectionBody is the body of a retry or a purge: where (endpoint),
// and which dead letters: ids, a group (FailureGroup.ID) or all, each
// narrowed by the filter's other fields.
type apiSelectionBody struct {
	apiFilter
	IDs   []string `json:"ids"`
	Group string   `json:"group"`
	All   bool     `json:"all"`
}

// apiCount is the answer of a retry or a purge.
type apiCount struct {
	Count int `json:"count"`
}

func (c *Console) apiDeadLetterRetry(w http.ResponseWriter, r *http.Request) {
	c.apiDeadLetterAction(w, r, "retry")
}

func (c *Console) apiDeadLetterPurge(w http.ResponseWriter, r *http.Request) {
	c.apiDeadLetterAction(w, r, "purge")
}

// apiDeadLetterAction retries or purges the dead letters the body selects.
func (c *Console) apiDeadLetterAction(w http.ResponseWriter, r *http.Request, action string) {
	var body apiSelectionBody
	if !c.apiRead(w, r, &body, false) {
		return
	}
	if len(body.IDs) == 0 && body.Group == "" && !body.All {
		c.apiProblem(w, http.StatusBadRequest, problemBadRequest, "select dead letters: give ids, a group, or all: true (the filter's fields narrow any of them)")
		return
	}
	if len(body.IDs) > store.FailedBatchMax {
		c.apiProblem(w, http.StatusBadRequest, problemBadRequest, fmt.Sprintf("ids: at most %d at once (all: true with a filter selects more)", store.FailedBatchMax))
		return
	}
	if body.Group != "" && !store.ValidGroupID(body.Group) {
		c.apiProblem(w, http.StatusBadRequest, problemBadRequest, "group: want the id of a group of GET /api/dead-letters/groups")
		return
	}
	sel := store.FailedSelection{All: body.All, Group: body.Group, IDs: make([]uuid.UUID, len(body.IDs))}
	for i, s := range body.IDs {
		id, err := uuid.Parse(s)
		if err != nil {
			c.apiProblem(w, http.StatusBadRequest, problemBadRequest, fmt.Sprintf("ids[%d]: want an event's id (a UUID)", i))
			return
		}
		sel.IDs[i] = id
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	var ok bool
	if sel.FailedFilter, _, ok = c.apiReadFilter(ctx, w, body.apiFilter); !ok {
		return
	}
	var (
		n   int
		err error
	)
	if action == "retry" {
		n, err = c.cfg.Store.FailedRetry(ctx, store.FailedRetryParams{FailedSelection: sel})
	} else {
		n, err = c.cfg.Store.FailedPurge(ctx, store.FailedPurgeParams{FailedSelection: sel})
	}
	c.log.Info("console: API: "+action+" of dead letters", "endpoint", body.Endpoint, "ids", len(sel.IDs), "group", sel.Group, "all", sel.All,
		"done", n, "client", c.clientAddr(r).String(), "error", err)
	if err != nil {
		c.apiFail(w, fmt.Sprintf("%s (%d done; send it again to finish)", action, n), err)
		return
	}
	c.apiJSON(w, http.StatusOK, apiCount{Count: n})
}

// apiStatsBody is the answer of GET /api/stats: the outbox's counts by
// status and by type, and each endpoint's deliveries by status.
type apiStatsBody struct {
	Outbox    apiOutboxCounts    `json:"outbox"`
	Types     []store.TypeStats  `json:"types"`
	Endpoints []apiEndpointStats `json:"endpoints"`
}

type apiOutboxCounts struct {
	store.StatusCounts
	// OldestPendingSeconds is the age of the oldest event waiting to be
	// claimed; 0 when none waits.
	OldestPendingSeconds float64 `json:"oldest_pending_seconds"`
}

type apiEndpointStats struct {
	ID         uuid.UUID         `json:"id"`
	Name       string            `json:"name"`
	State      string            `json:"state"`
	Shadow     bool              `json:"shadow"`
	Deliveries apiDeliveryCounts `json:"deliveries"`
}

type apiDeliveryCounts struct {
	store.DeliveryCounts
	OldestPendingSeconds float64 `json:"oldest_pending_seconds"`
}

func (c *Console) apiStats(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	st, err := c.cfg.Store.Stats(ctx)
	if err != nil {
		c.apiFail(w, "counting the outbox", err)
		return
	}
	types, err := c.cfg.Store.StatsByType(ctx)
	if err != nil {
		c.apiFail(w, "counting the outbox by type", err)
		return
	}
	rows, err := c.readEndpoints(ctx)
	if err != nil {
		c.apiFail(w, "counting the endpoints' deliveries", err)
		return
	}
	out := apiStatsBody{
		Outbox: apiOutboxCounts{StatusCounts: st, OldestPendingSeconds: st.OldestPendingAge.Seconds()},
		Types:  nonNil(types), Endpoints: make([]apiEndpointStats, len(rows)),
	}
	for i, e := range rows {
		out.Endpoints[i] = apiEndpointStats{ID: e.ID, Name: e.Name, State: e.State, Shadow: e.Shadow,
			Deliveries: apiDeliveryCounts{DeliveryCounts: e.Counts, OldestPendingSeconds: e.Counts.OldestPendingAge.Seconds()}}
	}
	c.apiJSON(w, http.StatusOK, out)
}
