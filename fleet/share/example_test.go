package share_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/fleet/share"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// A relay process joins the fleet, watches its members, and drains the
// sources Mine gives its slot, until its context ends; a lost slot makes it
// stop draining and join again.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(pgtest.URL()) // the fleet database
	if err != nil {
		log.Fatal(err)
	}
	fleet := "example-" + randomHex() // a relay would name its fleet: "relays"
	sources := []string{"orders", "billing", "shipping", "accounts", "search", "mail"}

	// Another process of the fleet.
	other, err := share.Join(ctx, cfg, share.Options{Fleet: fleet})
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()

	m, err := share.Join(ctx, cfg, share.Options{Fleet: fleet})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	fmt.Println("slot", m.Slot())

	watchCtx, stop := context.WithCancel(ctx)
	err = m.Watch(watchCtx, time.Second, func(live []int) {
		mine := share.Mine(sources, live, m.Slot(), 1)
		fmt.Println("live", live, "drains", len(mine), "of", len(sources))
		// A relay would start draining mine here, and stop what it drains
		// that is no longer among them.
		stop() // the example stops after the first live set
	})
	if errors.Is(err, share.ErrLost) {
		// Stop draining, Close m, and Join again.
		log.Print(err)
	}
	// Output:
	// slot 1
	// live [0 1] drains 3 of 6
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
