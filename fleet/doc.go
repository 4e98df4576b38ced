// Package fleet runs one relay per source over many databases and
// schemas in one process: the sources come from a list re-read while the
// fleet runs (a file, a registry query), a source added is started and a
// source removed or changed is stopped, and each source is isolated from
// the others: one that cannot be opened, is not migrated, or whose relay
// stops is retried on its own, with a back-off, and its state is logged
// once per change rather than once per failed claim.
//
// What a relay is, and which resources sources share (a pool per
// database, one listening connection per database), is the caller's: the
// fleet calls Config.Open for each source it starts. The command postbox
// relay --sources builds it from the flags.
package fleet
