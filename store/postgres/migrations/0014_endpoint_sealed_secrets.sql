-- Webhook endpoints' secrets encrypted at rest, content filters, envelopes
-- and signature profiles (store.Endpoint's Sealed, Filter, Envelope,
-- Signature). Secrets of new rows are sealed by the relay's key (package
-- keyring, through package endpoint): the store keeps the sealed blob as
-- given (sealed, byte for byte) and never sees them in clear; postbox
-- endpoints rekey seals the rows written before, whose secrets are still
-- in clear in secret and previous_secret. A sealed row holds '' in secret
-- (not null, as the SQLite store, which cannot drop a NOT NULL) and null
-- in previous_secret; previous_secret_until stays a clear column, the end
-- of a rotation's grace period for sealed rows too.
--   sealed             the sealed secrets; null: the row is not sealed.
--   sealed_key         the id of the key that sealed them (rekey finds
--                      the rows of an old key).
--   sealed_fingerprint the signing secrets' fingerprints (not secret).
--   auth               what the sealed credentials authenticate with, for
--                      display ("basic", "bearer+headers", ...; not secret).
--   filter             a CEL expression on the event ('' none).
--   envelope           the envelope's name ('' the raw payload).
--   signature          the signature profile's spec ('' the standard one).
-- Nullable columns and constant defaults: no rewrite of the table.
alter table {schema}.endpoints
  add column sealed             bytea,
  add column sealed_key         text not null default '',
  add column sealed_fingerprint text not null default '',
  add column auth               text not null default '',
  add column filter             text not null default '',
  add column envelope           text not null default '',
  add column signature          text not null default '';
