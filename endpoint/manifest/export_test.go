package manifest

import "github.com/postbox-go/postbox/endpoint"

// CredentialsOf is e's credentials as Resolve read them, for the tests.
func CredentialsOf(e *Endpoint) endpoint.Credentials { return e.creds }
