package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"
)

func TestScratchBusy(t *testing.T) {
	db, err := sql.Open("sqlite", t.TempDir()+"/x.db?_txlock=immediate&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(9)
	db.SetMaxIdleConns(9)
	db.Exec(`create table t (x text)`)
	var mu sync.Mutex
	var maxWait time.Duration
	var n, errs int
	var wg sync.WaitGroup
	sem := make(chan struct{}, 1)
	stop := time.Now().Add(3 * time.Second)
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				start := time.Now()
				sem <- struct{}{}
				tx, err := db.BeginTx(context.Background(), nil)
				w := time.Since(start)
				if err != nil {
					mu.Lock(); errs++; mu.Unlock()
					continue
				}
				tx.Exec(`insert into t values ('hello')`)
				err = tx.Commit()
				<-sem
				if err != nil {
					mu.Lock(); errs++; mu.Unlock()
				}
				mu.Lock()
				n++
				maxWait = max(maxWait, w)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("n=%d errs=%d maxWait=%v", n, errs, maxWait)
}
