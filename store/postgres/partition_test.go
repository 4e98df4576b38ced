package postgres_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/postboxtest/storetest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// Every conformance suite on a partitioned outbox: claims, leases, ordered
// mode, dedup keys, hostile rows, endpoints pass unchanged.
func TestPartitionConformance(t *testing.T) {
	storetest.Exercise(t, storetest.Harness[pgx.Tx]{Dialect: "postgres", New: partitionedSubject})
}

// partitionedSubject is subject, its outbox partitioned (a second per
// partition) after Migrate and MigrateOrdered.
func partitionedSubject(t *testing.T, p store.SchemaParams) storetest.Subject[pgx.Tx] {
	sub := subject(t, p)
	if _, err := sub.Store.(*postgres.Store).Partition(t.Context(), postgres.PartitionParams{Interval: time.Second}); err != nil {
		t.Fatal(err)
	}
	return sub
}
