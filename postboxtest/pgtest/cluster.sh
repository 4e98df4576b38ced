# The supervisor of a throwaway cluster (see cluster.go), run as the user
# the cluster runs as: cluster.sh BINDIR BASE PORT WAL_LEVEL.
#
# It makes a cluster in BASE/data, starts it on 127.0.0.1:PORT (its unix
# socket in BASE) and prints "ready" once it accepts connections, or what
# went wrong and exits. Then it waits for its standard input to close (the
# test binary exited), stops the server at once and removes BASE.
set -u
bin=$1 base=$2 port=$3 wal_level=$4
exec 2>&1

fail() {
  cat "$1"
  rm -rf "$base"
  exit 1
}

"$bin/initdb" -D "$base/data" -U postgres -A trust -E UTF8 --locale=C --no-sync --no-instructions \
  >"$base/initdb.log" 2>&1 || fail "$base/initdb.log"

# A throwaway server: no durability, little memory, room for the slots and
# connections of a package's tests.
"$bin/postgres" -D "$base/data" -p "$port" -k "$base" -c listen_addresses=127.0.0.1 \
  -c wal_level="$wal_level" -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
  -c shared_buffers=32MB -c max_connections=200 -c max_wal_senders=64 -c max_replication_slots=64 \
  -c logging_collector=off >"$base/postgres.log" 2>&1 </dev/null &
pg=$!

until "$bin/pg_isready" -q -h "$base" -p "$port"; do
  kill -0 "$pg" 2>/dev/null || fail "$base/postgres.log"
  sleep 0.05
done
echo ready
exec >/dev/null 2>&1

# Blocks until the test binary's end of the pipe closes.
cat >/dev/null
kill -QUIT "$pg"
wait "$pg"
# A child of the server may outlive it by a moment: once more if need be.
rm -rf "$base" 2>/dev/null || { sleep 1; rm -rf "$base"; }
