// Package archtest keeps the module's architecture the one
// docs/architecture.md draws: a house whose floors are its packages, each
// package standing one floor above the highest of the module's packages it
// imports, and each folder one floor, so that no import runs back up.
//
// It has no code, only tests, which read the module's import graph from
// `go list` and the documentation from docs/architecture.md:
//
//   - the floors table of docs/architecture.md names every package of the
//     module on the floor its imports give it, and nothing else: a new
//     package without a line, or an import that lifts a package to another
//     floor, fails until the table says so;
//   - no import runs back up a folder: a package imports nothing from a
//     folder whose head package stands on its own folder's floor or above
//     (the SSRF guard once sat in endpoint/, above the webhook sink that
//     dials through it);
//   - a few imports that floors alone do not show stay forbidden: the
//     consumer side (inbox) imports nothing of the producer side (sink),
//     whose wire format both take from package postbox; the module's
//     internal/ holds only leaf helpers (floor 0: the applications live
//     under cmd/postbox/internal/); no library imports a test kit of
//     postboxtest/;
//   - the binary users run, cmd/postbox, links no test-only module
//     (franz-go's in-memory Kafka, kfake, comes only with -tags kfake)
//     and of postboxtest/ only the fault injectors postbox chaos and
//     postbox demo drive.
//
// It is a package of its own, rather than tests of the root package,
// because it is about the module as a whole and not about the vocabulary
// the root package holds: it runs the go command and reads the docs, and
// imports nothing of the module, so it stays on floor 0 and cannot lift
// any other package.
package archtest
