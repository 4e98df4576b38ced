-- Producers notify only while a relay dozes. A relay that is busy claiming
-- (events keep coming) needs no notification, and every NOTIFY makes the
-- notifying commits take turns cluster-wide; so a committing transaction
-- notifies only when some relay waits for it.
--
-- Two advisory locks on (class, hashtext('{channel}')):
--   {doze_lock}  held shared, at session level, by each dozing relay on its
--         listening connection, from an empty claim until its claims find
--         events again;
--   {doze_barrier_lock}  held shared by each committing producer from the moment it looks
--         for dozing relays until its commit ends. A relay about to doze
--         tries it exclusively (and lets it go): that succeeds only when no
--         producer that may have missed its mark is still committing, and its
--         next claim sees their events.
-- While a relay dozes every committing transaction notifies: a relay dozes
-- only when events are rare, and it stops dozing once they flow.
-- The trigger runs once per transaction (a transaction-local setting
-- remembers it), deferred to the commit so that {doze_barrier_lock} is held briefly. (A
-- transaction that runs it early, with "set constraints all immediate",
-- holds {doze_barrier_lock} until it ends; relays meanwhile look for events every few
-- milliseconds, up to 64 ms apart, instead of dozing.)
-- The check takes {doze_lock} at session level and lets it go at once; a query
-- cancel landing between the two would leave a producer's connection holding
-- it: relays could not doze (they look every 64 ms and log a warning) and
-- every commit would notify, until that connection closes. Find it with
--   select pid from pg_locks where locktype = 'advisory' and classid = {doze_lock} and mode = 'ExclusiveLock';
create or replace function {schema}.postbox_outbox_notify() returns trigger
language plpgsql as $$
begin
  if current_setting('postbox.notify_checked', true) = '{channel}' then
    return null;
  end if;
  perform set_config('postbox.notify_checked', '{channel}', true);
  perform pg_advisory_xact_lock_shared({doze_barrier_lock}, hashtext('{channel}'));
  if pg_try_advisory_lock({doze_lock}, hashtext('{channel}')) then
    -- No relay dozes: nobody to wake.
    perform pg_advisory_unlock({doze_lock}, hashtext('{channel}'));
  else
    perform pg_notify('{channel}', '');
  end if;
  return null;
end
$$;
