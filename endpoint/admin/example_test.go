package admin_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/store/sqlite"
)

// Example adds a webhook endpoint, its signing secret generated and
// sealed with the operator's key, then rotates the secret: the previous
// one keeps signing for a day.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "postbox-admin-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "postbox.db"), sqlite.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	// The key comes from $POSTBOX_SECRETS_KEY or a file (keyring.Load).
	k, err := keyring.Parse(keyring.GenerateKey())
	if err != nil {
		log.Fatal(err)
	}
	a, err := admin.New(admin.Config{Store: s.Driver(), Keyring: k})
	if err != nil {
		log.Fatal(err)
	}

	created, err := a.Create(ctx, admin.Settings{Name: "warehouse", URL: "https://93.184.215.14/hooks", Types: []string{"order.*"},
		Filter: "payload.total > 100", Envelope: "standard"}, endpoint.Credentials{Bearer: "partner-token"})
	if err != nil {
		log.Fatal(err)
	}
	v := created.Endpoint
	fmt.Println("added:", v.Name, v.State, v.Envelope, v.Auth, v.Concurrency)
	fmt.Println("generated secret shown once:", strings.HasPrefix(created.Secret, "whsec_"))
	fmt.Println("view shows its fingerprint:", v.SecretFingerprint == endpoint.Fingerprint(created.Secret))

	rotated, err := a.RotateSecret(ctx, v.ID, "", 24*time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	shown, err := a.Get(ctx, v.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("new secret signs:", shown.SecretFingerprint == rotated.Fingerprint)
	fmt.Println("previous one until the grace ends:", shown.PreviousSecretFingerprint == v.SecretFingerprint)

	_, err = a.Create(ctx, admin.Settings{URL: "http://169.254.169.254/latest/"}, endpoint.Credentials{})
	fmt.Println(err)
	// Output:
	// added: warehouse enabled standard [bearer] 8
	// generated secret shown once: true
	// view shows its fingerprint: true
	// new secret signs: true
	// previous one until the grace ends: true
	// url: 169.254.169.254 is link-local (cloud metadata), which the relay's SSRF guard refuses: give allow_private to let this endpoint reach private addresses
}
