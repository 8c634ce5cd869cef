#!/usr/bin/env bash
# A primary, two replicas and three Redis Sentinels on loopback, in a temporary directory;
# then the primary is killed and Sentinel promotes a replica (docs/replication.md).
#
#   scripts/replication-demo.sh            # ports 16379-16381 (RESP), 17070-17072 (HTTP),
#                                          # 26379-26381 (Sentinel); BASE=20000 moves them all
# Needs: the project's venv (make setup) and redis-server (its --sentinel mode).
# Everything it starts is stopped when it ends (or on Ctrl-C); the directory is removed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
BASE=${BASE:-16379}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/topicsrv-repl-demo.XXXXXX")
PIDS=()
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
command -v redis-server >/dev/null || { echo "needs redis-server (scripts/ensure-tools.sh)"; exit 1; }

resp() { echo $((BASE + $1)); }
serve() {  # serve N [extra args...]
  local n=$1; shift
  "$PY" -m topicsrv serve --data-dir "$WORK/n$n" --http-port $((BASE - 16379 + 17070 + n)) \
    --resp-port "$(resp "$n")" "$@" >"$WORK/n$n.out" 2>"$WORK/n$n.log" &
  PIDS+=($!)
  until redis-cli -p "$(resp "$n")" ping >/dev/null 2>&1; do sleep 0.1; done
}
serve 0
serve 1 --replicaof "127.0.0.1:$(resp 0)"
serve 2 --replicaof "127.0.0.1:$(resp 0)"
PRIMARY_PID=${PIDS[0]}
for i in 0 1 2; do
  port=$((BASE - 16379 + 26379 + i))
  printf 'port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster 127.0.0.1 %s 2\nsentinel down-after-milliseconds mymaster 2000\nsentinel failover-timeout mymaster 10000\n' \
    "$port" "$WORK" "$(resp 0)" >"$WORK/sentinel$i.conf"
  redis-server "$WORK/sentinel$i.conf" --sentinel >"$WORK/sentinel$i.log" 2>&1 &
  PIDS+=($!)
done
S=$((BASE - 16379 + 26379))
redis-cli -p "$(resp 0)" set greeting hello >/dev/null
echo "WAIT 1 1000 -> $(redis-cli -p "$(resp 0)" wait 1 1000) replica(s) hold the write"
until [ "$(redis-cli -p "$S" sentinel replicas mymaster 2>/dev/null | grep -c '^ip$')" = 2 ]; do sleep 0.5; done
echo "Sentinel: primary $(redis-cli -p "$S" sentinel get-master-addr-by-name mymaster | paste -sd:)," \
     "replicas found: 2"
for n in 0 1 2; do echo "  :$(resp "$n") $(redis-cli -p "$(resp "$n")" role | head -1)"; done
echo "kill -9 the primary (:$(resp 0))"
{ kill -9 "$PRIMARY_PID"; wait "$PRIMARY_PID"; } 2>/dev/null || true
until [ "$(redis-cli -p "$S" sentinel get-master-addr-by-name mymaster | tail -1)" != "$(resp 0)" ]; do sleep 0.5; done
NEW=$(redis-cli -p "$S" sentinel get-master-addr-by-name mymaster | tail -1)
echo "Sentinel promoted :$NEW; GET greeting there -> $(redis-cli -p "$NEW" get greeting)"
for n in 1 2; do echo "  :$(resp "$n") $(redis-cli -p "$(resp "$n")" role | head -1)"; done
