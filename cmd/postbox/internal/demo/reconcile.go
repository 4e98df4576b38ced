package demo

import (
	"context"
	"fmt"
)

// Reconciliation queries, on the business tables: every order must have
// exactly one reservation.
const (
	countOrdersSQL       = `select count(*) from %s`
	countAppliedOnceSQL  = `select count(*) from (select order_id from %s group by order_id having count(*) = 1) once`
	countAppliedTwiceSQL = `select count(*) from (select order_id from %s group by order_id having count(*) > 1) twice`
	countLostSQL         = `select count(*) from %s o where not exists (select 1 from %s r where r.order_id = o.id)`
)

// reconcile computes the report from the database, not from counters.
func reconcile(ctx context.Context, b *backend) (Report, error) {
	var r Report
	var err error
	count := func(dst *int64, q string) {
		if err == nil {
			*dst, err = b.query(ctx, q)
		}
	}
	count(&r.Created, fmt.Sprintf(countOrdersSQL, b.orders))
	count(&r.AppliedOnce, fmt.Sprintf(countAppliedOnceSQL, b.reservations))
	count(&r.AppliedTwice, fmt.Sprintf(countAppliedTwiceSQL, b.reservations))
	count(&r.Lost, fmt.Sprintf(countLostSQL, b.orders, b.reservations))
	if err != nil {
		return r, fmt.Errorf("demo: reconcile: %w", err)
	}
	st, err := b.outbox.Stats(ctx)
	if err != nil {
		return r, fmt.Errorf("demo: reconcile: %w", err)
	}
	r.DeadLettered = st.Failed
	return r, nil
}
