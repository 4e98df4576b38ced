-- Numbered like the PostgreSQL store's migration 0003, which drops the index
-- of ordered claims there (PostgreSQL builds it on demand, with
-- "postbox migrate --ordered"). MySQL keeps
-- {prefix}outbox_events_aggregate_open_idx: its ordered claim needs it and a
-- MySQL relay takes no extra step, so nothing changes here.
do 0;
