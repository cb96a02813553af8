#!/usr/bin/env bash
# A/B of the service alone, two builds in interleaved rounds (issue 29: fair admission must cost a
# lone tenant nothing). Usage: bench/ab-service.sh <baseline checkout, built> <candidate checkout, built>
# Each round starts each build on its own DATA_DIR (WORKERS=2, raw_v1), makes a token with its CLI and
# runs ../shared/peers/load.mjs for 8 s after 2 s of warm-up at concurrency 4.
set -u
LOAD=${LOAD:-$(dirname "$0")/../../shared/peers/load.mjs}
BASE=$1; HEAD=$2
run_one() { # dir port kind
  local dir=$1 port=$2 kind=$3 data; data=$(mktemp -d)
  ( cd "$dir" && DATA_DIR=$data PORT=$port WORKERS=2 LOG_LEVEL=warn node dist/src/main.js >/dev/null 2>&1 & echo $! > $data/pid )
  for i in $(seq 1 120); do curl -fs http://127.0.0.1:$port/health/ready >/dev/null && break; sleep 1; done
  local tok; tok=$(cd "$dir" && DATA_DIR=$data node dist/src/cli/main.js token create --name ab --grant rgb_liveness:unlimited:never | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).token))')
  node $LOAD --base http://127.0.0.1:$port --token "$tok" --module rgb_liveness --kind $kind --concurrency 4 --seconds 8 --warmup 2
  kill $(cat $data/pid); sleep 2; rm -rf "$data"
}
for round in 1 2 3; do
  for kind in single-rgb8 single-png; do
    echo "round $round $kind base $(run_one "$BASE" 18081 $kind)"
    echo "round $round $kind head $(run_one "$HEAD" 18082 $kind)"
  done
done
