package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/internal/printable"
)

// setupEndpointsRekey is endpoints rekey: every endpoint's secrets sealed
// by the primary key of the secrets key given (endpoint.Rekey).
func setupEndpointsRekey(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	dryRun := fs.Bool("dry-run", false, "write nothing: say what would be sealed and re-wrapped")
	var key secretsKeyFlag
	key.register(fs, "whose first key seals (the others, the keys being retired, only open)")
	return func(ctx context.Context) error {
		k, err := key.load("endpoints rekey")
		if err != nil {
			return err
		}
		s, closeDB, err := endpointsStore(ctx, &db, "rekey", *dryRun)
		if err != nil {
			return err
		}
		defer closeDB()
		report, err := endpoint.Rekey(ctx, s, k, *dryRun)
		if err != nil {
			return err
		}
		printRekey(os.Stdout, report, k.PrimaryID(), *dryRun)
		if n := len(report.Failed); n > 0 {
			return fmt.Errorf("endpoints rekey: %d endpoints left as they were (listed above): give the key that sealed them (its id is named) in the keyring, after the new one", n)
		}
		return nil
	}
}

// printRekey prints what endpoints rekey did, or would do with dryRun:
// the counts, then each endpoint it could not seal or re-wrap and why (the
// reasons name keys by id, never a secret).
func printRekey(w io.Writer, r endpoint.RekeyReport, primary string, dryRun bool) {
	sealed, rewrapped := "sealed", "re-wrapped"
	if dryRun {
		sealed, rewrapped = "would be sealed", "would be re-wrapped"
		fmt.Fprintln(w, "dry run: nothing written")
	}
	fmt.Fprintf(w, "%d endpoints %s by key %s (their secrets were in clear)\n", r.Sealed, sealed, primary)
	fmt.Fprintf(w, "%d endpoints %s under key %s (sealed by an older key)\n", r.Rewrapped, rewrapped, primary)
	fmt.Fprintf(w, "%d endpoints already sealed by key %s\n", r.Current, primary)
	if len(r.Failed) == 0 {
		return
	}
	fmt.Fprintf(w, "%d endpoints failed:\n", len(r.Failed))
	for _, f := range r.Failed {
		name := ""
		if f.Name != "" {
			name = " (" + printable.String(f.Name) + ")"
		}
		fmt.Fprintf(w, "  %s%s: %s\n", f.ID, name, wholeLine(f.Err.Error()))
	}
}
