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
// # Profiles
//
// A Profile is a scheme under other header names, for receivers migrating
// from another provider: only the names change, never what is signed nor
// the signature's form. ParseProfile reads "standard" and "x-signature"
// (the schemes' own names), "svix" (Svix signs as Standard Webhooks, under
// svix-id, svix-timestamp and svix-signature: the Svix libraries verify
// its requests), "standard;prefix=acme" (acme-id, acme-timestamp,
// acme-signature) and "x-signature;id=X-Acme-Id,timestamp=X-Acme-Ts,
// signature=X-Acme-Sig"; NewProfileSigner and NewProfileVerifier sign and
// verify under a profile's names. The names are HTTP tokens, three
// distinct ones, none a postbox header nor one of the request's own
// (Content-Type, Authorization, framing and hop-by-hop headers):
// ErrInvalidProfile otherwise.
//
// # Metadata
//
// Neither scheme signs the headers beside the body, and a receiver that
// routes on an event type header, or orders on a sequence header, would
// act on what anyone on the path can write. So a Signer also signs the
// postbox metadata headers the header map holds when Sign is called:
// Postbox-Event-Type, Postbox-Aggregate-Type, Postbox-Aggregate-Id and
// Postbox-Sequence, with the id and the same timestamp, into
//
//	Postbox-Metadata-Signature: <the scheme's signature of the metadata content>
//
// with the same keys: "v1,<base64>" and "v1a,<base64>" entries over
// id + "." + timestamp + "." + content in Standard, "sha256=<hex>" over
// timestamp || content in XSignature, where content is
//
//	"postbox-metadata-v1" LF id LF event type LF aggregate type LF aggregate id LF sequence
//
// each value as the header holds it with spaces and tabs trimmed at both
// ends (as HTTP servers read it), "" for an absent header, LF a line feed
// byte. So an independent Standard Webhooks library verifies the metadata
// signature as it verifies a body: given the Postbox-Metadata-Signature
// value as the signature header and the content as the payload. Absent
// headers are signed as empty, so none can be added on the way. Sign and
// VerifyMetadata refuse a metadata header given twice or holding a line
// break (ErrMalformedHeader). The body's signature header is unchanged:
// verifiers that know nothing of the metadata signature keep verifying the
// body, and ignore the extra header.
//
// Verifier.VerifyMetadata checks the metadata signature and returns the
// Metadata it covers (ErrMetadataUnsigned when the request has none). A
// receiver acts on the metadata only after both Verify (the body) and
// VerifyMetadata succeed: together they tie the body and the metadata to
// one id and timestamp. In XSignature the body's signature does not cover
// the id, so the receiver also checks that the body names the id (see
// SignsID), as package inbox does with its "event_id" field. Other headers
// (Postbox-Attempt, trace context) are not signed: use them for logs and
// traces only.
//
// # Rotation
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
