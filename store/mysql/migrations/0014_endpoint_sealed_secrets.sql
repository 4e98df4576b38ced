-- Numbered and named like the PostgreSQL store's migration 0014: webhook
-- endpoints' secrets encrypted at rest, content filters, envelopes and
-- signature profiles (store.Endpoint's Sealed, Filter, Envelope,
-- Signature). The store keeps the sealed blob as given (sealed, bytes) and
-- never sees the secrets in clear; a sealed row holds '' in secret and
-- null in previous_secret.
alter table {prefix}endpoints
  add column sealed longblob,
  add column sealed_key mediumtext not null default (''),
  add column sealed_fingerprint mediumtext not null default (''),
  add column auth mediumtext not null default (''),
  add column filter mediumtext not null default (''),
  add column envelope mediumtext not null default (''),
  add column signature mediumtext not null default ('');
