-- Numbered like the PostgreSQL store's migration 0004, which makes producers
-- notify only while a relay dozes (LISTEN/NOTIFY). MySQL has no
-- notifications: relays poll the outbox's newest seq (see listen.go), at no
-- cost to producers, so nothing changes here.
do 0;
