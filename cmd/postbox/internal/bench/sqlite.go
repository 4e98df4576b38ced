package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// liteBackend runs the scenarios on SQLite. Each scratch outbox is a file
// of its own beside the path given (PATH.<run>_<label>), removed at the
// end: the file at PATH itself is never touched.
type liteBackend struct {
	path string
	run  string

	mu    sync.Mutex
	files map[string]*liteScratch // created and not dropped yet
}

func openSQLite(path, run string) (*liteBackend, error) {
	switch {
	case path == "":
		return nil, errors.New("bench: sqlite:PATH needs a file path")
	case strings.Contains(path, "?") || strings.HasPrefix(path, "file:"):
		return nil, errors.New("bench: sqlite:PATH: give a plain file path (the scratch files are created beside it)")
	}
	if dir := filepath.Dir(path); dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("bench: sqlite:PATH: folder %s does not exist", dir)
		}
	}
	return &liteBackend{path: path, run: run, files: map[string]*liteScratch{}}, nil
}

func (b *liteBackend) kind() string { return "sqlite" }
func (b *liteBackend) close()       {}

func (b *liteBackend) info(ctx context.Context) (string, map[string]string) {
	settings := map[string]string{
		"synchronous":  sqlite.SynchronousDefault,
		"journal_mode": "WAL",
		"files":        b.path + "." + b.run + "_*",
	}
	version := "SQLite"
	s, err := b.newScratch(ctx, "info")
	if err != nil {
		return version, settings
	}
	defer s.drop(context.WithoutCancel(ctx))
	var v string
	if err := s.(*liteScratch).st.DB().QueryRowContext(ctx, liteVersion).Scan(&v); err == nil {
		version += " " + v
	}
	return version, settings
}

func (b *liteBackend) newScratch(ctx context.Context, label string) (scratch, error) {
	file := b.path + "." + b.run + "_" + label
	s := &liteScratch{b: b, file: file}
	b.mu.Lock()
	b.files[file] = s
	b.mu.Unlock()
	st, err := sqlite.Open(ctx, file, sqlite.Config{})
	if err != nil {
		return nil, err
	}
	s.st = st
	if _, err := st.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("bench: migrate %s: %w", file, err)
	}
	return s, nil
}

func (b *liteBackend) dropAll(ctx context.Context) error {
	b.mu.Lock()
	left := make([]*liteScratch, 0, len(b.files))
	for _, s := range b.files {
		left = append(left, s)
	}
	b.mu.Unlock()
	var errs []error
	for _, s := range left {
		errs = append(errs, s.drop(ctx))
	}
	return errors.Join(errs...)
}

func (b *liteBackend) leftovers(context.Context) ([]string, error) {
	files, err := filepath.Glob(b.path + "." + b.run + "_*")
	slices.Sort(files)
	return files, err
}

// liteScratch is a scratch SQLite file.
type liteScratch struct {
	b    *liteBackend
	file string
	st   *sqlite.Store
}

func (s *liteScratch) name() string         { return s.file }
func (s *liteScratch) outbox() store.Outbox { return s.st.Driver() }

func (s *liteScratch) sql(query string) string { return withTables(query, s.st.Table) }

func (s *liteScratch) enqueue(ctx context.Context, e postbox.Event) error {
	return s.st.Enqueue(ctx, e)
}

func (s *liteScratch) fill(ctx context.Context, from, to, aggregates int) error {
	_, err := s.st.DB().ExecContext(ctx, s.sql(liteFill), from, to, fillAggregates(aggregates))
	return err
}

// migrateOrdered does nothing: SQLite's migrations keep the index ordered
// claims need.
func (s *liteScratch) migrateOrdered(context.Context) error { return nil }

func (s *liteScratch) prepare(ctx context.Context) error {
	for _, q := range []string{liteAnalyze, liteCheckpoint} {
		if _, err := s.st.DB().ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

func (s *liteScratch) rawBatch(ctx context.Context, q rawQuery) (int64, error) {
	query := liteRawDelete
	if q == rawUpdate {
		query = liteRawUpdate
	}
	res, err := s.st.DB().ExecContext(ctx, s.sql(query), time.Now().UnixMicro())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (s *liteScratch) createOrders(ctx context.Context) error {
	_, err := s.st.DB().ExecContext(ctx, s.sql(liteCreateOrders))
	return err
}

// order writes the event with EnqueueTx in both event modes: SQLite runs in
// the process, with no round trip for Transact to save.
func (s *liteScratch) order(ctx context.Context, amount int64, mode orderMode) error {
	tx, err := s.st.DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var id int64
	if err := tx.QueryRowContext(ctx, s.sql(liteInsertOrder), amount).Scan(&id); err != nil {
		return err
	}
	if mode != orderPlain {
		if err := s.st.EnqueueTx(ctx, tx, orderEvent(id)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (s *liteScratch) relayFlags() []string { return []string{"--db", "sqlite:" + s.file} }

// drop closes the store and removes the file with its write-ahead log.
func (s *liteScratch) drop(context.Context) error {
	var errs []error
	if s.st != nil {
		errs = append(errs, s.st.Close())
	}
	for _, f := range []string{s.file, s.file + "-wal", s.file + "-shm", s.file + "-journal"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	s.b.mu.Lock()
	delete(s.b.files, s.file)
	s.b.mu.Unlock()
	return errors.Join(errs...)
}
