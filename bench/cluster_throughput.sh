#!/bin/bash
# usage: bench/cluster_throughput.sh MODE(single|cluster) — starts the stack, offers 600 page views/s for 20 s, reports, stops it.
# Ports 19500-19524 on loopback; needs nothing else running on them. Figures: docs/operations.md.
set -u
cd "$(dirname "$0")/.."
MODE=$1
export TALLY_HOME=${BENCH_HOME:-$PWD/.tally-bench}/$MODE TALLY_CLUSTER_BASE_PORT=19500 TALLY_COLLECTOR_PORT=19520 TALLY_DASHBOARD_PORT=19521 TALLY_CLICKHOUSE_URL=http://127.0.0.1:19522 TALLY_KAFKA_BOOTSTRAP=127.0.0.1:19524 TALLY_KAFKA_CONTROLLER_PORT=19523
rm -rf "$TALLY_HOME"  # a fresh home per run (BENCH_HOME, default ./.tally-bench)
if [ $MODE = cluster ]; then .venv/bin/tally up -d --cluster >/dev/null || exit 1; else .venv/bin/tally up -d >/dev/null || exit 1; fi
.venv/bin/tally sites add site1.example.com >/dev/null; .venv/bin/tally sites add site2.example.com >/dev/null; sleep 5
echo "load before: $(cat /proc/loadavg)"
start=$(date +%s.%N)
if [ $MODE = cluster ]; then
  .venv/bin/tally loadgen --rate 300 --duration 20 --bot-fraction 0 --target http://127.0.0.1:19520 --seed 1 > $TALLY_HOME.lg1.txt 2>&1 &
  .venv/bin/tally loadgen --rate 300 --duration 20 --bot-fraction 0 --target http://127.0.0.1:19512 --seed 2 > $TALLY_HOME.lg2.txt 2>&1 &
  wait
else
  .venv/bin/tally loadgen --rate 600 --duration 20 --bot-fraction 0 --processes 2 --target http://127.0.0.1:19520 --seed 1 > $TALLY_HOME.lg1.txt 2>&1
  echo > $TALLY_HOME.lg2.txt
fi
echo "load after sending: $(cat /proc/loadavg)"
cat $TALLY_HOME.lg1.txt $TALLY_HOME.lg2.txt | grep -iv "^\s*$" | tail -12
rm -f $TALLY_HOME.archive-$MODE.txt; last=-1; same=0
while [ $same -lt 6 ]; do
  n=$(.venv/bin/tally query "SELECT count() FROM events" --format csv 2>/dev/null | tail -1)
  echo "$(date +%s.%N) $n" >> $TALLY_HOME.archive-$MODE.txt
  if [ "$n" = "$last" ]; then same=$((same+1)); else same=0; last=$n; fi
  sleep 1
done
python3 - $start $TALLY_HOME.archive-$MODE.txt <<'PY'
import sys
start=float(sys.argv[1]); rows=[l.split() for l in open(sys.argv[2])]
final=rows[-1][1]; t=next(float(a) for a,b in rows if b==final)
print(f"archived {final} events, all in the archive {t-start:.1f} s after the first was sent")
PY
echo "load at end: $(cat /proc/loadavg)"
.venv/bin/tally down >/dev/null
