package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/endpoint/manifest"
	"github.com/postbox-go/postbox/internal/printable"
)

// setupEndpointsApply is postbox endpoints apply (package endpoint/manifest):
// it reads the file, prints the plan, and applies it with --yes.
func setupEndpointsApply(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	file := fs.String("f", "", "the endpoints `FILE`: YAML, version: 1 (- reads it from stdin); its secrets are references, env:NAME or file:PATH (relative to the file's folder)")
	prune := fs.Bool("prune", false, "remove the endpoints the file does not name, with their deliveries and attempts (without it they are kept, and listed)")
	dryRun := fs.Bool("dry-run", false, "print the plan and apply nothing")
	secretsOut := fs.String("secrets-out", "", "write the signing secrets apply generates to `FILE` (NAME SECRET lines, mode 0600; refused if it exists) instead of printing them")
	yes := fs.Bool("yes", false, "apply the plan (without it, and without --dry-run, the plan is printed and nothing applied)")
	grace := fs.Duration("grace", admin.GraceDefault, "when an endpoint's secret reference names another secret than its current one: how long the current one keeps signing beside it")
	var key secretsKeyFlag
	key.register(fs, "needed to compare the endpoints' credentials with the file's and to seal them")
	// What applies or removes is never read from the environment: a
	// variable left set must not turn a look at the plan into changes.
	setCommandLineOnly(fs, true, "f", "prune", "dry-run", "yes")
	return func(ctx context.Context) error {
		switch {
		case *file == "":
			return fmt.Errorf("%w: -f FILE is required: the endpoints file (- for stdin)", errUsage)
		case *dryRun && *yes:
			return fmt.Errorf("%w: give --dry-run or --yes, not both", errUsage)
		}
		if err := notNegative(fs, "grace"); err != nil {
			return err
		}
		m, err := loadManifest(*file)
		if err != nil {
			return err
		}
		k, err := key.load("endpoints apply")
		if err != nil {
			return err
		}
		// Only --yes writes: a plan does not create a SQLite file.
		s, closeDB, err := endpointsStore(ctx, &db, "apply", !*yes)
		if err != nil {
			return err
		}
		defer closeDB()
		// As the other endpoints commands (newEndpointAdmin), but for
		// the messages, which name the file's keys.
		a, err := admin.New(admin.Config{Store: s, Keyring: k, Kinds: endpointKinds, PrivateEndpoints: true})
		if err != nil {
			return err
		}
		plan, err := m.Plan(ctx, a, manifest.Options{Prune: *prune, Grace: *grace})
		if err != nil {
			return err
		}
		if err := plan.Write(os.Stdout); err != nil {
			return err
		}
		switch {
		case len(plan.Refusals) > 0:
			return fmt.Errorf("%w: the file has endpoints that postbox refuses (! refused above): nothing applied; mend the file and run again", errUsage)
		case len(plan.Conflicts) > 0:
			return errors.New("the plan has conflicts (! above), which apply does not guess: nothing applied")
		case plan.Empty():
			return nil
		case *dryRun:
			fmt.Println("--dry-run: nothing applied")
			return nil
		case !*yes:
			fmt.Println("nothing applied: give --yes to apply")
			return nil
		}
		var out *os.File
		if *secretsOut != "" {
			// Made before anything is applied: a file in the way refuses
			// the apply, not the secrets after it.
			if out, err = os.OpenFile(*secretsOut, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
				return fmt.Errorf("%w: --secrets-out: %v (nothing applied)", errUsage, err)
			}
		}
		fmt.Println()
		r, err := manifest.Apply(ctx, a, plan)
		if out != nil {
			if werr := writeSecretsOut(out, r); werr != nil {
				werr = fmt.Errorf("--secrets-out %s: %w: the secrets generated are lost; rotate them (postbox endpoints rotate-secret)", printable.String(*secretsOut), werr)
				err = errors.Join(err, werr)
			} else if len(r.Secrets) > 0 {
				fmt.Printf("%d generated secrets written to %s (give each to its receiver)\n", len(r.Secrets), printable.String(*secretsOut))
			}
			r.Secrets = nil
		}
		if werr := r.Write(os.Stdout); werr != nil && err == nil {
			err = werr
		}
		if errors.Is(err, admin.ErrInvalid) {
			err = fmt.Errorf("%w: %v (what is above was applied; mend the file and run again)", errUsage, err)
		} else if err != nil && len(r.Done) > 0 {
			err = fmt.Errorf("%w (what is above was applied; run again once mended)", err)
		}
		return err
	}
}

// writeSecretsOut writes r's generated secrets to out and closes it (an
// empty file when none was generated).
func writeSecretsOut(out *os.File, r manifest.Result) error {
	err := r.WriteSecrets(out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// loadManifest reads and resolves the endpoints file at path ("-":
// stdin). Its errors start with the file's name, then the line and column.
func loadManifest(path string) (*manifest.Manifest, error) {
	var r io.Reader = os.Stdin
	name := "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("%w: -f: %v", errUsage, err)
		}
		defer f.Close()
		r, name = f, printable.String(path)
	}
	m, err := manifest.Load(r)
	if err != nil {
		return nil, fileError(name, err)
	}
	if path != "-" {
		m.Dir = filepath.Dir(path)
	}
	if err := m.Resolve(os.LookupEnv); err != nil {
		return nil, fileError(name, err)
	}
	return m, nil
}

// fileError is a refusal of the file named name, as "name:line:col: key:
// why" (a usage error), or err as it is when the file was not read.
func fileError(name string, err error) error {
	var e *manifest.Error
	if !errors.As(err, &e) {
		return err
	}
	return fmt.Errorf("%w: %s:%v", errUsage, name, err)
}
