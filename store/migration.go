package store

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema change. Every store numbers and names
// the same change alike ("0001_outbox.sql": version 1, name "outbox").
type Migration struct {
	// Version is the migration's number, 1 for 0001_outbox.sql.
	Version int
	// Name is the file name's rest, "outbox" for 0001_outbox.sql.
	Name string
	// SQL is the file's text, placeholders unfilled.
	SQL string
}

// ReadMigrations reads the NNNN_name.sql files of dir in fsys, in version
// order.
func ReadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		base := strings.TrimSuffix(e.Name(), ".sql")
		num, name, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("store: migration file %q is not named NNNN_name.sql", e.Name())
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: version, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// CheckApplied is the verdict of a store's CheckSchema: where names the
// tables (a schema, a file); exists says whether its migrations table
// exists, applied is the highest version recorded there. The error wraps
// ErrNotMigrated and says what to run.
func CheckApplied(where string, exists bool, applied int, all []Migration) error {
	latest := 0
	if len(all) > 0 {
		latest = all[len(all)-1].Version
	}
	switch {
	case !exists:
		return fmt.Errorf(`%w: %s has no postbox tables: run "postbox migrate" (or Store.Migrate) first`, ErrNotMigrated, where)
	case applied < latest:
		return fmt.Errorf(`%w: %s is at migration %d, this postbox needs %d: run "postbox migrate" (or Store.Migrate)`, ErrNotMigrated, where, applied, latest)
	}
	return nil
}
