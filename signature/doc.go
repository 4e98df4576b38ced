// Package signature signs and verifies webhook requests, in the two schemes
// postbox speaks.
//
// Standard is the Standard Webhooks scheme (https://www.standardwebhooks.com)
// and the default: headers webhook-id, webhook-timestamp (unix seconds) and
//
//	webhook-signature: v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>
//
// with secrets written "whsec_<base64 key>", and its asymmetric form v1a:
//
//	webhook-signature: v1a,<base64 ed25519 signature of id + "." + timestamp + "." + body>
//
// signed with a private key written "whsk_<base64>" (the 64-byte ed25519
// private key, seed then public key, as Svix writes it; a 32-byte seed is
// accepted too) and verified with the public key "whpk_<base64 of 32
// bytes>". With v1a the receivers hold only the public key, which need not
// be secret: whoever reads it cannot sign. GenerateKeyPair makes a pair,
// PublicKey derives the public key of a private one, GenerateSecret makes a
// v1 secret.
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
// to the new one, then drop the old one. The same way, a sender moves from
// v1 to v1a: it signs with its whsec_ and its whsk_ ("v1,... v1a,..."), the
// receivers swap the whsec_ for the whpk_, then the sender drops the whsec_.
//
// Both sides refuse empty secrets, HMAC secrets shorter than SecretMinLen
// bytes and event ids that contain "."; a Signer refuses whpk_ keys and a
// Verifier whsk_ keys (ErrWrongKeyKind), and XSignature refuses both; a
// Verifier refuses timestamps further than its tolerance from its clock, in
// the past or in the future. All failures match the package's sentinel
// errors with errors.Is. Verification never parses the body: it only
// computes MACs and checks ed25519 signatures over its bytes.
package signature
