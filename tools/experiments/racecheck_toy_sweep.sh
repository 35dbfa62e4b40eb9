#!/usr/bin/env bash
# racecheck over tools/experiments/racecheck_barrier_toy.cu (session 23, device): every pair
# of extra warpgroup-barrier counts 0..3 in both access orders, with a producer warpgroup that
# leaves, with votes, and 64-round mixes. Prints "args ... : N hazards" per run (all 0 there).
set -u
cd "$(dirname "$0")/../.." || exit 1
nvcc -gencode=arch=compute_90a,code=sm_90a -o /tmp/toy tools/experiments/racecheck_barrier_toy.cu || exit 1
run() {
  local r
  r=$(compute-sanitizer --tool racecheck /tmp/toy "$@" 2>&1 | grep -o 'RACECHECK SUMMARY: [0-9]* hazards' | grep -o '[0-9]*')
  echo "args $* : ${r:-?} hazards"
}
for m in 0 1; do for a in 0 1 2 3; do for b in 0 1 2 3; do run $a $b 256 0 $m 1; done; done; done
run 0 1 384 0 0 1; run 1 2 384 0 0 1; run 0 1 256 1 0 1; run 1 0 256 0 1 1
for m in 0 1; do run 3 5 256 0 $m 64; run 3 5 384 1 $m 64; run 1 1 256 0 $m 64; done
