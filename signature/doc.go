// Package signature signs and verifies webhook requests, in the two schemes
// postbox speaks.
//
// Standard is the Standard Webhooks scheme (https://www.standardwebhooks.com)
// and the default: headers webhook-id, webhook-timestamp (unix seconds) and
//
//	webhook-signature: v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>
//
// with secrets written "whsec_<base64 key>".
//
// XSignature is the scheme of the article postbox grew from, for receivers
// written after it: headers X-Event-Id, X-Timestamp (unix seconds) and
//
//	X-Signature: sha256=<hex HMAC-SHA256(secret, timestamp || body)>
//
// XSignature does not sign the event id: whoever captured one request can
// replay its body and timestamp under another id, and so past an inbox that
// de-duplicates by id, for as long as the timestamp is within the tolerance.
// Scheme.SignsID reports this, so that a receiver can set its own policy,
// for example requiring the id to be repeated in the signed body.
//
// A Signer signs with every one of its secrets and a Verifier accepts a
// request signed with any one of its secrets, so secrets can be rotated
// without downtime: sign with the old and the new secret, move the receivers
// to the new one, then drop the old one.
//
// Both sides refuse empty secrets, secrets shorter than SecretMinLen bytes and
// event ids that contain "."; a Verifier refuses timestamps further than its
// tolerance from its clock, in the past or in the future. All failures match
// the package's sentinel errors with errors.Is. Verification never parses the
// body: it only computes MACs over its bytes.
package signature
