package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/postbox-go/postbox/store"
)

// statusJSON is the output of "postbox status --json".
type statusJSON struct {
	Pending                 int64   `json:"pending"`
	Processing              int64   `json:"processing"`
	Done                    int64   `json:"done"`
	Failed                  int64   `json:"failed"`
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
}

func setupStatus(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context) error {
		s, err := db.open(ctx, "status", true)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.Outbox.CheckSchema(ctx, store.SchemaParams{}); err != nil {
			return err
		}
		st, err := s.Outbox.Stats(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(os.Stdout).Encode(statusJSON{
				Pending: st.Pending, Processing: st.Processing, Done: st.Done, Failed: st.Failed,
				OldestPendingAgeSeconds: st.OldestPendingAge.Seconds(),
			})
		}
		fmt.Printf("pending     %d\nprocessing  %d\ndone        %d\nfailed      %d\noldest pending  %s\n",
			st.Pending, st.Processing, st.Done, st.Failed, st.OldestPendingAge.Round(time.Millisecond))
		return nil
	}
}
