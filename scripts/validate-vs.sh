#!/usr/bin/env bash
# `dmalab validate`'s wall time against an earlier build, in one command, so that the host's
# speed cancels out (this machine kind runs the same build at speeds that differ from one
# minute to the next).
#
#   bash scripts/validate-vs.sh [BASELINE] [ROUNDS] [MODE]
#
# BASELINE is a commit (default 3a2d404, the last build before validate's speed work); ROUNDS
# (default 3) is how many times the two builds run in turn, the order swapped every round;
# MODE is `no-intervals` (default: one run of every point) or `intervals` (validate's default,
# 16 draws a point: minutes a round for an old build). Each run is the whole shipped corpus.
# Prints every round's wall seconds, each build's median and the median of the rounds'
# speed-ups (the baseline's seconds over this build's). The baseline is built once, in a
# worktree under target/validate-baseline/ with its own environment (its scripts/setup.sh:
# minutes the first time). A benchmark, run by hand: not part of the test command.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-3a2d404}
rounds=${2:-3}
mode=${3:-no-intervals}
case $rounds in '' | *[!0-9]* | 0) echo "validate-vs: ROUNDS must be a whole number from 1 up, got '$rounds'" >&2; exit 2 ;; esac
case $mode in
  no-intervals) flags=(--no-intervals) ;;
  intervals) flags=() ;;
  *) echo "validate-vs: MODE must be no-intervals or intervals, got '$mode'" >&2; exit 2 ;;
esac
rev=$(git rev-parse --verify --quiet "$base^{commit}") || {
  echo "validate-vs: BASELINE '$base' is not a commit of this repository" >&2
  exit 2
}
tree="target/validate-baseline/$rev"
if [ ! -d "$tree" ]; then
  echo "validate-vs: checking out $base in $tree" >&2
  git worktree add --detach --quiet "$tree" "$rev"
fi
echo "validate-vs: building both (release)" >&2
bash "$tree/scripts/setup.sh"
bash scripts/setup.sh
old="$tree/.venv/bin/dmalab"
new=".venv/bin/dmalab"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for i in $(seq 1 "$rounds"); do
  if [ $((i % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for b in $order; do
    if [ "$b" = old ]; then cmd=$old; else cmd=$new; fi
    start=$(date +%s.%N)
    "$cmd" validate "${flags[@]}" >/dev/null 2>&1
    end=$(date +%s.%N)
    secs=$(python3 -c "print(f'{$end - $start:.1f}')")
    echo "validate-vs: round $i of $rounds: $b $secs s" >&2
    echo "$i $b $secs" >>"$out"
  done
done
python3 - "$out" "$base" "$mode" <<'EOF'
import statistics
import sys

rows = [line.split() for line in open(sys.argv[1])]
secs = {(int(r), b): float(s) for r, b, s in rows}
rounds = sorted({r for r, _ in secs})
old = [secs[(r, "old")] for r in rounds]
new = [secs[(r, "new")] for r in rounds]
print(f"dmalab validate ({sys.argv[3]}), the shipped corpus: this build against {sys.argv[2]}")
for r, o, n in zip(rounds, old, new):
    print(f"  round {r}: {sys.argv[2]} {o:.1f} s, this build {n:.1f} s, speed-up {o / n:.2f}x")
ups = [o / n for o, n in zip(old, new)]
print(
    f"median: {sys.argv[2]} {statistics.median(old):.1f} s, this build "
    f"{statistics.median(new):.1f} s, speed-up {statistics.median(ups):.2f}x"
)
EOF
