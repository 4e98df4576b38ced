// Package manifest is the declarative side of managing webhook endpoints
// (postbox endpoints apply): a YAML file lists the endpoints an operator
// wants, by name, and Plan compares it with the store, Apply makes the
// store match it through package endpoint/admin, so that every check the
// command line and the console make is made here too.
//
// The file:
//
//	version: 1
//	endpoints:
//	  - name: warehouse                  # required, unique in the file: the identity
//	    url: https://wh.example/hook
//	    types: [order.*]
//	    filter: 'payload.total > 100'
//	    envelope: standard
//	    rate_per_second: 50
//	    concurrency: 4
//	    state: enabled                   # or disabled; absent: left as it is
//	    secret: env:WAREHOUSE_SECRET     # absent: generated on create, kept after
//	    headers: {X-Api-Key: file:/run/secrets/wh-key}
//	    auth: {bearer: env:WH_TOKEN}
//
// An endpoint's settings are what the file says: a key left out is its
// default (no filter, every type, the raw envelope, concurrency
// admin.ConcurrencyDefault, no headers, no authentication), except state
// and secret, which are left as they are when absent.
//
// Every secret (the signing secret, header values, a bearer token, a Basic
// password, an OAuth2 client secret, the TLS files) is a reference:
// env:NAME (an environment variable) or file:PATH (a file's contents, one
// trailing new line trimmed; a relative path is read from Manifest.Dir). A
// secret written in the file is refused, and no error quotes one: postbox
// never writes a secret into the file, and never reads one from it. The
// url may be a reference too (a chat service's incoming-webhook URL is a
// secret): url: env:HOOK_URL. Plan shows a URL described (its kind and
// host, admin.Admin.DescribeURL), never its path nor its query.
//
// Plan reports, for each endpoint, whether it is created, updated (which
// settings, old -> new; the URL as "changed"; which credentials, never their values), removed
// (only with Options.Prune) or unchanged; a name several stored endpoints
// have is a conflict, never guessed. Plan asks admin to check every
// endpoint it creates or changes (admin's Check, CheckChange and
// CheckSecret) and lists each refusal, so that a bad file is refused
// whole: Apply applies nothing of a plan with conflicts or refusals.
// Apply makes the plan's changes; a second Plan after it is empty.
package manifest
