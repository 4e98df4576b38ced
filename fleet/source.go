package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"

	"github.com/postbox-go/postbox/internal/printable"
)

// Source is one outbox a fleet drains: a database and a schema, with how
// the relay over it publishes.
type Source struct {
	// Name identifies the source in logs, metrics (the source label),
	// status and the sharing among processes. Default: the database's name
	// and the schema, "orders/public" (a SQLite file's base name alone).
	Name string `yaml:"name"`
	// DB is the database URL: postgres://... or sqlite:PATH; "env:NAME"
	// reads it from the environment variable NAME, so that a password need
	// not be written in the file. Required.
	DB string `yaml:"db"`
	// Schema holds the postbox tables (PostgreSQL; default the command's
	// --schema).
	Schema string `yaml:"schema"`
	// Weight is the source's share of the process's delivery slots and
	// claims beside the others' (default 1, at most MaxWeight).
	Weight int `yaml:"weight"`
	// Sink is where the source's events go (a --sink URL; default the
	// command's --sink). Give Sink or Endpoints, not both.
	Sink string `yaml:"sink"`
	// Endpoints publishes into the fan-out to the webhook endpoints kept
	// in the source's own database (endpoints mode).
	Endpoints bool `yaml:"endpoints"`
	// WAL streams the source's inserts from a logical replication slot
	// (postbox relay --wal) instead of listening for them.
	WAL bool `yaml:"wal"`
}

// Limits of a list of sources.
const (
	// MaxSources is the most sources one list may hold: each is a relay
	// in the process and a value of the metrics' source label.
	MaxSources = 10000
	// MaxWeight is the largest weight of a source.
	MaxWeight = 1000
	// MaxFileSize is the largest sources file read.
	MaxFileSize = 4 << 20
)

// sourceName is what a source's name may hold: it becomes a label value
// and a log attribute.
var sourceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:-]{0,127}$`)

// schemaName is what a schema may be (the PostgreSQL store's rule).
var schemaName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// Defaults are what a source that does not say takes.
type Defaults struct {
	// Schema is the schema of a source that names none.
	Schema string
	// Sink is the sink of a source that names none and is not in
	// endpoints mode; empty: such a source is refused.
	Sink string
	// Getenv reads the environment variables of "env:NAME" URLs
	// (os.Getenv when nil).
	Getenv func(string) string
}

// fileDoc is the sources file: a list under "sources".
type fileDoc struct {
	Sources []Source `yaml:"sources"`
}

// ReadFile reads a sources file (see Parse).
func ReadFile(name string, d Defaults) ([]Source, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, MaxFileSize)
	}
	list, err := Parse(data, d)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return list, nil
}

// Parse parses a sources file, one YAML document:
//
//	sources:
//	  - name: tenant-a
//	    db: postgres://relay@db1:5432/tenant_a
//	    schema: postbox
//	    weight: 2
//	  - db: env:TENANT_B_URL
//	    endpoints: true
//
// Unknown keys are refused, and so is a list that Check refuses. The
// defaults fill what a source does not say.
func Parse(data []byte, d Defaults) ([]Source, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var doc fileDoc
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, errors.New("the file is empty: want a list under sources:")
	case err != nil:
		return nil, errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		return nil, errors.New("a second YAML document (after ---): the file holds one")
	}
	return Complete(doc.Sources, d)
}

// Querier runs the query of Query: a *pgxpool.Pool, a *pgx.Conn or a
// pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Query runs sql, a query on a registry database, and returns its rows as
// sources: a column is matched to a field by name (name, db, schema,
// weight, sink, endpoints, wal; db is required), a NULL takes the default,
// and a column of another name is refused.
func Query(ctx context.Context, q Querier, sql string, d Defaults) ([]Source, error) {
	rows, err := q.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols := rows.FieldDescriptions()
	hasDB := false
	for _, c := range cols {
		switch c.Name {
		case "db":
			hasDB = true
		case "name", "schema", "weight", "sink", "endpoints", "wal":
		default:
			return nil, fmt.Errorf("the query returns a column %q: want name, db, schema, weight, sink, endpoints, wal", c.Name)
		}
	}
	if !hasDB {
		return nil, errors.New("the query returns no db column")
	}
	var list []Source
	for rows.Next() {
		if len(list) == MaxSources {
			return nil, fmt.Errorf("the query returns more than %d sources", MaxSources)
		}
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		var s Source
		for i, c := range cols {
			if err := s.set(c.Name, vals[i]); err != nil {
				return nil, fmt.Errorf("row %d: %w", len(list)+1, err)
			}
		}
		list = append(list, s)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return Complete(list, d)
}

// set sets the field of column col to v, a value of pgx's (nil: NULL).
func (s *Source) set(col string, v any) error {
	if v == nil {
		return nil
	}
	switch col {
	case "weight":
		switch n := v.(type) {
		case int16:
			s.Weight = int(n)
		case int32:
			s.Weight = int(n)
		case int64:
			if n > MaxWeight || n < -MaxWeight {
				return fmt.Errorf("weight %d: want 1 to %d", n, MaxWeight)
			}
			s.Weight = int(n)
		default:
			return fmt.Errorf("weight: want an integer, not %T", v)
		}
		return nil
	case "endpoints", "wal":
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("%s: want a boolean, not %T", col, v)
		}
		if col == "wal" {
			s.WAL = b
		} else {
			s.Endpoints = b
		}
		return nil
	}
	text, ok := v.(string)
	if !ok {
		return fmt.Errorf("%s: want text, not %T", col, v)
	}
	switch col {
	case "name":
		s.Name = text
	case "db":
		s.DB = text
	case "schema":
		s.Schema = text
	case "sink":
		s.Sink = text
	}
	return nil
}

// Complete fills the defaults of every source in list and checks it: db
// given (an env:NAME set), a schema of letters, digits and underscores, a
// weight from 1 to MaxWeight, a sink or endpoints mode, a name of at most
// 128 letters, digits and ._/:- unique in the list, and at most
// MaxSources sources. Its errors name the source by its place and name,
// never by its URL.
func Complete(list []Source, d Defaults) ([]Source, error) {
	if len(list) > MaxSources {
		return nil, fmt.Errorf("%d sources: at most %d", len(list), MaxSources)
	}
	getenv := d.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	out := make([]Source, len(list))
	names := make(map[string]int, len(list))
	for i, s := range list {
		where := fmt.Sprintf("source %d", i+1)
		if s.Name != "" {
			where += fmt.Sprintf(" (%s)", shown(s.Name))
		}
		if err := s.complete(d, getenv); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if j, dup := names[s.Name]; dup {
			return nil, fmt.Errorf("%s: the name %s is also source %d's: give each a name of its own", where, s.Name, j+1)
		}
		names[s.Name] = i
		out[i] = s
	}
	return out, nil
}

func (s *Source) complete(d Defaults, getenv func(string) string) error {
	if v, ok := strings.CutPrefix(s.DB, "env:"); ok {
		if s.DB = getenv(v); s.DB == "" {
			return fmt.Errorf("db: the environment variable %s is empty", v)
		}
	}
	if s.DB == "" {
		return errors.New("db is required")
	}
	if s.Schema == "" {
		s.Schema = d.Schema
	}
	if s.Schema != "" && !schemaName.MatchString(s.Schema) {
		return fmt.Errorf("schema `%s`: use letters, digits and underscores (at most 48)", shown(s.Schema))
	}
	switch {
	case s.Weight == 0:
		s.Weight = 1
	case s.Weight < 0 || s.Weight > MaxWeight:
		return fmt.Errorf("weight %d: want 1 to %d", s.Weight, MaxWeight)
	}
	switch {
	case s.Endpoints && s.Sink != "":
		return errors.New("give sink or endpoints: true, not both")
	case !s.Endpoints && s.Sink == "":
		if s.Sink = d.Sink; s.Sink == "" {
			return errors.New("no sink: give sink (or the command's --sink) or endpoints: true")
		}
	}
	if s.Name == "" {
		s.Name = defaultName(s.DB, s.Schema)
	}
	if !sourceName.MatchString(s.Name) {
		return fmt.Errorf("name `%s`: use at most 128 letters, digits and ._/:- (starting with a letter or digit)", shown(s.Name))
	}
	return nil
}

// defaultName is the name of a source that gives none: the database's
// name and the schema, or a SQLite file's base name.
func defaultName(db, schema string) string {
	if p, ok := strings.CutPrefix(db, "sqlite:"); ok {
		return strings.TrimSuffix(path.Base(p), path.Ext(p))
	}
	u, err := url.Parse(db)
	if err != nil {
		return schema
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		name = u.User.Username()
	}
	return name + "/" + schema
}

// shown is what an error may show of a value read from outside: at most
// 64 bytes, unsafe runes escaped.
func shown(s string) string {
	if len(s) > 64 {
		return printable.String(s[:64]) + "…"
	}
	return printable.String(s)
}
