// Package keyring seals small secrets (webhook endpoints' signing secrets,
// credentials, header values) for storage at rest, under keys the operator
// gives, so that a dump of the database shows no secret in clear.
//
// It is envelope encryption with the standard library: each Seal draws a
// fresh 32-byte data key (DEK), seals the plaintext with AES-256-GCM under
// the DEK, and wraps the DEK with AES-256-GCM under the keyring's primary
// key. Rotating the key only re-wraps the DEK (Rewrap); the sealed data is
// not touched.
//
// # Keys
//
// A key is 32 random bytes (AES-256). GenerateKey writes one as
//
//	pbkey_<base64url without padding of the 32 bytes>
//
// and ParseKey reads that form, the plain base64 of the 32 bytes (standard
// or URL alphabet, padded or not) or 64 hex digits. Its errors never quote
// the text, which may be a key: they give its length and what is expected.
//
// A key's id names it without revealing it:
//
//	"k-" + hex(SHA-256("postbox keyring key id" || key)[:8])
//
// for example "k-3f9a0c1d2e4b5a69". Ids are safe to log and print.
//
// # Keyrings and rotation
//
// A Keyring holds a primary key, which seals, and any number of previous
// keys, which only open. Parse reads one from text: keys separated by
// commas, spaces or newlines, the first the primary; lines starting with
// "#" are comments (a key file may hold them). Load reads the text from a
// key file or from the value of EnvVar (POSTBOX_SECRETS_KEY).
//
// To rotate: put the new key first and keep the old one after it
// ("NEW,OLD"); what is sealed from then on is sealed by NEW, and old blobs
// still open. Rewrap every stored blob (it re-wraps under the primary and
// leaves blobs already sealed by it unchanged); once no blob names OLD
// (KeyID), remove OLD.
//
// A Keyring is safe for concurrent use. Its String, GoString and Format
// methods print only key ids, so it can be logged; no error of this package
// holds a key or a plaintext.
//
// # Blob format
//
// Seal returns, in this order (offsets in bytes, n the plaintext length):
//
//	[0, 1)      version: 1
//	[1, 9)      key id: the 8 bytes the id's hex digits spell, of the key that wraps the DEK
//	[9, 13)     header check: SHA-256("postbox keyring header" || bytes [0, 9))[:4]
//	[13, 25)    wrap nonce: 12 random bytes
//	[25, 73)    wrapped DEK: AES-256-GCM(key, wrap nonce, DEK, additional data bytes [0, 9)),
//	            the 32-byte DEK then the 16-byte tag
//	[73, 85)    data nonce: 12 random bytes
//	[85, n+101) ciphertext: AES-256-GCM(DEK, data nonce, plaintext, additional data aad),
//	            n bytes then the 16-byte tag
//
// so a blob is 101 bytes longer than its plaintext. The additional data of
// the wrap (the version and the key id) binds the wrapped DEK to the key
// that wraps it; the caller's aad (an endpoint's id, for example) binds the
// data to the row that holds it, so that a blob copied into another row
// does not open there. The header check is no security measure (anyone can
// recompute it): it tells a damaged key id (ErrCorrupt) from a key the
// keyring lacks (ErrUnknownKey).
//
// Nonces are random. NIST bounds a GCM key with random nonces to 2^32
// seals; a key wraps one DEK per Seal or Rewrap, far below that for the
// secrets of a postbox database, and each DEK seals once.
package keyring
