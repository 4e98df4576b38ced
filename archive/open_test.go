package archive_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/store"
)

// Open takes a file URL with a prefix: the archive's objects are files
// under that folder of the directory.
func TestOpenFileURLWithPrefix(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, err := archive.Open(ctx, "file://"+filepath.ToSlash(dir)+"?prefix=outbox/&no_tmp_dir=true")
	if err != nil {
		t.Fatal(err)
	}
	if got := a.String(); !strings.Contains(got, dir) || !strings.Contains(got, "prefix=outbox") {
		t.Errorf("String() = %s, want the directory and the prefix", got)
	}
	es := events(base, 5)
	keep(t, a, es)
	same(t, es, readAll(t, a, archive.ReadParams{}))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "outbox", "events", "2026", "03", "14", "15", "*.ndjson.gz"))
	entries, _ := filepath.Glob(filepath.Join(dir, "outbox", "manifest", "2026", "03", "14", "15", "*.json"))
	if len(matches) != 1 || len(entries) != 1 {
		t.Errorf("objects %v, entries %v: want one of each under outbox/", matches, entries)
	}

	// Opened again (mem:// too), the archive reads what was kept.
	b, err := archive.Open(ctx, "file://"+filepath.ToSlash(dir)+"?prefix=outbox/")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	same(t, es, readAll(t, b, archive.ReadParams{Filter: store.HistoryFilter{EventTypes: []string{"order.*"}}}))
	m, err := archive.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := readAll(t, m, archive.ReadParams{}); len(got) != 0 {
		t.Errorf("a new mem:// archive holds %d events", len(got))
	}
}

// Open's errors never repeat a secret of the URL: a URL that does not
// parse, a scheme no driver is registered for (this test registers no s3
// driver), an unknown parameter.
func TestOpenErrorsHideSecrets(t *testing.T) {
	ctx := context.Background()
	for _, raw := range []string{
		"s3://AKIAEXAMPLE:hunter2@bucket?region=eu-west-1",
		"s3://bucket?region=eu-west-1&secret=hunter2",
		"mem://?secret=hunter2",
		"file:///" + strings.TrimPrefix(filepath.ToSlash(os.TempDir()), "/") + "?token=hunter2",
		"s3://AKIAEXAMPLE:hunter2@bucket/%zz",
		"no scheme hunter2",
	} {
		a, err := archive.Open(ctx, raw)
		if err == nil {
			a.Close()
			t.Errorf("Open(%s): no error", raw)
			continue
		}
		t.Log(err)
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "AKIA") {
			t.Errorf("Open(%s): %v: the secret shows", raw, err)
		}
	}
}
