-- Producers notify only while a relay dozes. A relay that is busy claiming
-- (events keep coming) needs no notification, and every NOTIFY makes the
-- notifying commits take turns cluster-wide; so a committing transaction
-- notifies only when some relay waits for it.
--
-- Three advisory locks on (class, hashtext('{channel}')):
--   2029  held shared, at session level, by each dozing relay on its
--         listening connection, from its last empty claim until a
--         notification wakes it;
--   2030  held shared by each committing producer from the moment it looks
--         for dozing relays until its commit ends. A relay about to doze
--         takes it exclusively (try, then release): it succeeds only when no
--         producer that may have missed its mark is still committing, and its
--         next claim sees their events;
--   2028  producers that notify together take turns on it; one that finds
--         it taken skips, and the relay claims again after the notified
--         claim (and dozes again only through 2030).
-- The trigger runs once per transaction (a transaction-local setting
-- remembers it), deferred to the commit so that 2030 is held briefly. (A
-- transaction that runs it early, with "set constraints all immediate",
-- holds 2030 until it ends; relays meanwhile look for events every few
-- milliseconds, up to 64 ms apart, instead of dozing.)
create or replace function {schema}.postbox_outbox_notify() returns trigger
language plpgsql as $$
begin
  if current_setting('postbox.notify_checked', true) = '{channel}' then
    return null;
  end if;
  perform set_config('postbox.notify_checked', '{channel}', true);
  perform pg_advisory_xact_lock_shared(2030, hashtext('{channel}'));
  if pg_try_advisory_lock(2029, hashtext('{channel}')) then
    -- No relay dozes: nobody to wake.
    perform pg_advisory_unlock(2029, hashtext('{channel}'));
  elsif pg_try_advisory_xact_lock(2028, hashtext('{channel}')) then
    perform pg_notify('{channel}', '');
  end if;
  return null;
end
$$;
