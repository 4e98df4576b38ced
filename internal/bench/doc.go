// Package bench measures postbox against its performance goals: the drain
// rate of a backlog to a no-op sink beside raw-SQL drains of the same
// backlog, signed webhooks to a local receiver, commit-to-delivery latency
// at steady rates, the write overhead of an event in a business
// transaction, and the drain rate and resident memory of a relay as the
// backlog grows. It backs "postbox bench".
//
// Every scenario works in scratch outboxes of its own: PostgreSQL schemas
// named postbox_bench_<run>_<label>, or SQLite files beside the path given,
// created and migrated with the stores' own Migrate and dropped at the end
// of the run (Config.Keep keeps them). Backlogs are filled with the
// article's plain-SQL insert, so the figures measure whatever the stores and
// the relay do today, and a backlog counts as drained when the store's own
// Stats show nothing pending or processing.
//
// The relay runs with its defaults: only Store, Sink and Logger are set
// (Concurrency too in the scaling scenario, which varies it). The scale and
// scaling scenarios run each relay in a child process (the same executable,
// with ChildEnv set; see ServeChild), so its resident memory is its own.
//
// The SQL the scenarios run is in sql.go, in named constants.
package bench
