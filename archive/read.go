package archive

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"time"

	"github.com/google/uuid"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/postbox-go/postbox/store"
)

// ReadParams selects archived events.
type ReadParams struct {
	Filter store.HistoryFilter
	// After is the id after which to read; zero: from the first, the nil
	// id included (an event may have it).
	After uuid.UUID
	// BatchSize is the most events handed to fn at once; zero or less:
	// DefaultBatchSize.
	BatchSize int
}

// DefaultBatchSize is ReadParams.BatchSize when it is not set.
const DefaultBatchSize = 1000

// maxBuffered is the largest object Read reads whole into memory to check
// it before decoding it; a larger one is downloaded once to a temporary
// file, checked as it comes, then decoded from the file.
const maxBuffered = 4 << 20

// Read hands fn the archived events p selects, in id order, each id once
// (an event archived twice is handed once), in batches; an error of fn
// stops it and is returned.
//
// Read lists the manifest of the hours p.Filter's window covers (no
// window: the whole manifest) and opens only the objects that can hold an
// event after p.After in the window, one at a time as the merge reaches
// their first id: its memory is that of the objects whose ids overlap
// (one over 4 MiB is downloaded to a temporary file, removed when read),
// plus a name per object in the window. Each object is downloaded once,
// and checked whole against its entry (size, SHA-256) before it is
// decoded (a corrupt, truncated or replaced object stops Read with an
// error naming its key before any of its events is handed on), its events
// then against the entry's count, ids and times.
func (a *Archive) Read(ctx context.Context, p ReadParams, fn func([]store.HistoryEvent) error) error {
	if err := p.Filter.Check(); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	size := p.BatchSize
	if size <= 0 {
		size = DefaultBatchSize
	}
	var names []name
	err := a.walk(ctx, p.Filter.Since, p.Filter.Until, func(n name) error {
		if p.wants(n.maxID) {
			names = append(names, n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(names, func(x, y name) int {
		return cmp.Or(bytes.Compare(x.minID[:], y.minID[:]), cmp.Compare(x.entryKey(), y.entryKey()))
	})

	var open cursors
	defer func() {
		for _, c := range open {
			c.close()
		}
	}()
	var (
		batch   []store.HistoryEvent
		last    uuid.UUID
		started bool
	)
	for {
		// Open every object whose first id comes before the merge's next:
		// it may hold the next event.
		for len(names) > 0 && (len(open) == 0 || bytes.Compare(names[0].minID[:], open[0].cur.ID[:]) <= 0) {
			c, err := a.openCursor(ctx, names[0], p)
			if err != nil {
				return err
			}
			names = names[1:]
			if c != nil {
				heap.Push(&open, c)
			}
		}
		if len(open) == 0 {
			break
		}
		c := open[0]
		e := c.cur
		switch err := c.next(); {
		case err == io.EOF:
			heap.Pop(&open)
			c.close()
		case err != nil:
			return err
		default:
			heap.Fix(&open, 0)
		}
		if started && e.ID == last {
			continue
		}
		started, last = true, e.ID
		if !p.Filter.Match(e.EventType, e.AggregateType, e.AggregateID, e.CreatedAt) {
			continue
		}
		batch = append(batch, e)
		if len(batch) == size {
			if err := fn(batch); err != nil {
				return err
			}
			batch = nil
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	if len(batch) > 0 {
		return fn(batch)
	}
	return nil
}

// Objects hands fn the manifest entry of every object holding events
// written within f's window (Since, Until; f's other fields are not
// looked at): what the archive holds, for a status.
func (a *Archive) Objects(ctx context.Context, f store.HistoryFilter, fn func(Object) error) error {
	if err := f.Check(); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	return a.walk(ctx, f.Since, f.Until, func(n name) error {
		o, err := a.entry(ctx, n)
		if err != nil {
			return err
		}
		if !overlaps(o, f) {
			return nil
		}
		return fn(o)
	})
}

// wants reports whether id comes after p.After: any id, the nil one
// included, when After is zero.
func (p ReadParams) wants(id uuid.UUID) bool {
	return p.After == uuid.Nil || bytes.Compare(id[:], p.After[:]) > 0
}

// overlaps reports whether o may hold events written within f's window.
func overlaps(o Object, f store.HistoryFilter) bool {
	return (f.Since.IsZero() || !o.MaxCreatedAt.Before(f.Since)) &&
		(f.Until.IsZero() || o.MinCreatedAt.Before(f.Until))
}

// wantsTypes reports whether o may hold an event of a type f lets through.
func wantsTypes(o Object, f store.HistoryFilter) bool {
	if len(f.EventTypes) == 0 || len(o.EventTypes) == 0 {
		return true
	}
	for _, t := range o.EventTypes {
		for _, g := range f.EventTypes {
			if ok, _ := path.Match(g, t); ok {
				return true
			}
		}
	}
	return false
}

// walk hands fn the names of the entries in the manifest folders of the
// hours [since, until) meets (a zero bound: open). A window of at most
// maxHourListings hours lists each of its hours' folders; a longer one
// lists a folder wholly inside it in one listing, and goes down into the
// subfolders of one it cuts; no window lists the whole manifest.
func (a *Archive) walk(ctx context.Context, since, until time.Time, fn func(name) error) error {
	if !since.IsZero() && !until.IsZero() {
		first, end := hourOf(since), hourOf(until.Add(-time.Nanosecond)).Add(time.Hour)
		if end.Sub(first) <= maxHourListings*time.Hour {
			for h := first; h.Before(end); h = h.Add(time.Hour) {
				if err := a.walkDir(ctx, manifestDir+h.Format(hourLayout), len(dirLayouts)-1, since, until, fn); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return a.walkDir(ctx, manifestDir, 0, since, until, fn)
}

// maxHourListings is the longest window (in hours) walk lists hour by
// hour, one listing each: shorter than going down the folders of years,
// months and days to find them.
const maxHourListings = 24

// dirLayouts are the layouts of the manifest's folders by depth (0: the
// manifest itself).
var dirLayouts = []string{"", "2006/", "2006/01/", "2006/01/02/", "2006/01/02/15/"}

func (a *Archive) walkDir(ctx context.Context, dir string, depth int, since, until time.Time, fn func(name) error) error {
	inside := since.IsZero() && until.IsZero()
	if depth > 0 {
		start, err := time.Parse(dirLayouts[depth], dir[len(manifestDir):])
		if err != nil || start.Format(dirLayouts[depth]) != dir[len(manifestDir):] {
			return nil // not a folder of ours
		}
		end := [...]time.Time{{}, start.AddDate(1, 0, 0), start.AddDate(0, 1, 0), start.AddDate(0, 0, 1), start.Add(time.Hour)}[depth]
		if (!until.IsZero() && !start.Before(until)) || (!since.IsZero() && !end.After(since)) {
			return nil
		}
		inside = (since.IsZero() || !start.Before(since)) && (until.IsZero() || !end.After(until))
	}
	delimiter := "/"
	if inside || depth == len(dirLayouts)-1 {
		delimiter = ""
	}
	it := a.bucket.List(&blob.ListOptions{Prefix: dir, Delimiter: delimiter})
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		lctx, cancel := context.WithTimeout(ctx, callTimeout)
		o, err := it.Next(lctx)
		cancel()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("archive: list %s: %w", dir, err)
		}
		if o.IsDir {
			if depth+1 < len(dirLayouts) {
				if err := a.walkDir(ctx, o.Key, depth+1, since, until, fn); err != nil {
					return err
				}
			}
			continue
		}
		n, ok := parseEntryKey(o.Key)
		if !ok {
			continue // not an entry Keep writes
		}
		if (!until.IsZero() && !n.hour.Before(until)) || (!since.IsZero() && !n.hour.Add(time.Hour).After(since)) {
			continue
		}
		if err := fn(n); err != nil {
			return err
		}
	}
}

// readEntry reads the entry at key; found is false when there is none.
func (a *Archive) readEntry(ctx context.Context, key string) (o Object, found bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	r, err := a.bucket.NewReader(rctx, key, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return o, false, nil
	}
	if err != nil {
		return o, false, fmt.Errorf("archive: manifest entry %s: %w", key, err)
	}
	defer r.Close()
	doc, err := io.ReadAll(io.LimitReader(r, maxEntryBytes+1))
	if err != nil {
		return o, true, fmt.Errorf("archive: manifest entry %s: %w", key, err)
	}
	if len(doc) > maxEntryBytes {
		return o, true, fmt.Errorf("archive: manifest entry %s: larger than %d bytes", key, maxEntryBytes)
	}
	if err := json.Unmarshal(doc, &o); err != nil {
		return o, true, fmt.Errorf("archive: manifest entry %s: %w", key, err)
	}
	return o, true, nil
}

// entry reads and checks the entry n names: it must describe the object n
// names, as Keep wrote it.
func (a *Archive) entry(ctx context.Context, n name) (Object, error) {
	key := n.entryKey()
	o, found, err := a.readEntry(ctx, key)
	if err != nil {
		return o, err
	}
	if !found {
		return o, fmt.Errorf("archive: manifest entry %s: gone (removed while read?)", key)
	}
	bad := func(what string) (Object, error) {
		return o, fmt.Errorf("archive: manifest entry %s: %s", key, what)
	}
	switch {
	case o.Key != n.objectKey():
		return bad(fmt.Sprintf("names the object %q, not %s", truncate(o.Key), n.objectKey()))
	case o.MinID != n.minID || o.MaxID != n.maxID:
		return bad("its ids are not its name's")
	case o.Count < 1 || o.Bytes < 1:
		return bad("an empty object")
	case len(o.SHA256) != 2*sha256.Size || !isHex(o.SHA256):
		return bad("no SHA-256")
	case !hourOf(o.MinCreatedAt).Equal(n.hour) || !hourOf(o.MaxCreatedAt).Equal(n.hour) || o.MaxCreatedAt.Before(o.MinCreatedAt):
		return bad("its times are not its hour's")
	}
	return o, nil
}

// cursor is an object being read: its next event, in cur.
type cursor struct {
	obj  Object
	dec  *decoder
	file *os.File // the object spooled, or nil (read whole)
	cur  store.HistoryEvent
}

// openCursor opens the object n names, checked, at its first event after
// p.After; nil when it holds nothing Read wants.
func (a *Archive) openCursor(ctx context.Context, n name, p ReadParams) (*cursor, error) {
	// Some buckets (files, memory) do not look at the context.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o, err := a.entry(ctx, n)
	if err != nil {
		return nil, err
	}
	if !overlaps(o, p.Filter) || !wantsTypes(o, p.Filter) {
		return nil, nil
	}
	// Checked whole before it is decoded, so that no event of a corrupt
	// object is handed on.
	c := &cursor{obj: o}
	var checked io.Reader
	if o.Bytes <= maxBuffered {
		data, err := a.readWhole(ctx, o)
		if err != nil {
			return nil, err
		}
		checked = bytes.NewReader(data)
	} else {
		if c.file, err = a.spool(ctx, o); err != nil {
			return nil, err
		}
		checked = c.file
	}
	if c.dec, err = newDecoder(checked, o.Count); err != nil {
		c.close()
		return nil, c.fail(err)
	}
	for {
		err := c.next()
		if err == io.EOF {
			c.close()
			return nil, nil
		}
		if err != nil {
			c.close()
			return nil, err
		}
		if p.wants(c.cur.ID) {
			return c, nil
		}
	}
}

// readWhole reads a small object and checks it against its entry.
func (a *Archive) readWhole(ctx context.Context, o Object) ([]byte, error) {
	rctx, cancel := context.WithTimeout(ctx, objectTimeout)
	defer cancel()
	r, err := a.bucket.NewReader(rctx, o.Key, nil)
	if err != nil {
		return nil, fmt.Errorf("archive: object %s: %w", o.Key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, o.Bytes+1))
	if err != nil {
		return nil, fmt.Errorf("archive: object %s: %w", o.Key, err)
	}
	sum := sha256.Sum256(data)
	if err := checkSum(o, int64(len(data)), sum[:]); err != nil {
		return nil, err
	}
	return data, nil
}

// spool downloads a large object to a temporary file, checking it against
// its entry as it comes: the file, at its start, holds the object checked.
// Its caller removes it (removeTemp).
func (a *Archive) spool(ctx context.Context, o Object) (*os.File, error) {
	rctx, cancel := context.WithTimeout(ctx, objectTimeout)
	defer cancel()
	r, err := a.bucket.NewReader(rctx, o.Key, nil)
	if err != nil {
		return nil, fmt.Errorf("archive: object %s: %w", o.Key, err)
	}
	defer r.Close()
	f, err := os.CreateTemp("", "postbox-archive-*"+objectExt)
	if err != nil {
		return nil, fmt.Errorf("archive: object %s: %w", o.Key, err)
	}
	h := sha256.New()
	size, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, o.Bytes+1))
	if err != nil {
		err = fmt.Errorf("archive: object %s: %w", o.Key, err)
	} else if err = checkSum(o, size, h.Sum(nil)); err == nil {
		if _, err = f.Seek(0, io.SeekStart); err != nil {
			err = fmt.Errorf("archive: object %s: %w", o.Key, err)
		}
	}
	if err != nil {
		removeTemp(f)
		return nil, err
	}
	return f, nil
}

// removeTemp closes and removes a temporary file of spool.
func removeTemp(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}

// checkSum compares an object's size and SHA-256 with its entry's.
func checkSum(o Object, size int64, sum []byte) error {
	if size != o.Bytes {
		return fmt.Errorf("archive: object %s: %d bytes where its manifest entry says %d (truncated or replaced)", o.Key, size, o.Bytes)
	}
	if hex.EncodeToString(sum) != o.SHA256 {
		return fmt.Errorf("archive: object %s: its SHA-256 is not its manifest entry's (corrupt or replaced)", o.Key)
	}
	return nil
}

// next moves c to its next event; io.EOF after its last, once the object
// proved whole.
func (c *cursor) next() error {
	first := c.dec.n == 0
	e, err := c.dec.next()
	if err == io.EOF {
		if c.dec.last != c.obj.MaxID {
			return c.fail(errors.New("its last id is not its entry's"))
		}
		return io.EOF
	}
	if err != nil {
		return c.fail(err)
	}
	switch {
	case first && e.ID != c.obj.MinID:
		return c.fail(errors.New("its first id is not its entry's"))
	case e.CreatedAt.Before(c.obj.MinCreatedAt) || e.CreatedAt.After(c.obj.MaxCreatedAt):
		return c.fail(fmt.Errorf("event %s: created_at outside its entry's", e.ID))
	}
	c.cur = e
	return nil
}

func (c *cursor) fail(err error) error {
	return fmt.Errorf("archive: object %s: %w", c.obj.Key, err)
}

func (c *cursor) close() {
	if c.file != nil {
		removeTemp(c.file)
		c.file = nil
	}
}

// cursors is a heap of open objects, by their next event's id.
type cursors []*cursor

func (h cursors) Len() int { return len(h) }
func (h cursors) Less(i, j int) bool {
	return cmp.Or(bytes.Compare(h[i].cur.ID[:], h[j].cur.ID[:]), cmp.Compare(h[i].obj.Key, h[j].obj.Key)) < 0
}
func (h cursors) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursors) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *cursors) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}
