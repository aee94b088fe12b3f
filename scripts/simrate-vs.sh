#!/usr/bin/env bash
# The simulator's speed against an earlier build, in one command, so that the host's speed
# cancels out: this machine kind runs the same build from one minute to the next at rates
# that differ by up to 2x, so a rate in transfers per wall second says as much about the host
# as about the code.
#
#   bash scripts/simrate-vs.sh [BASELINE] [ROUNDS]
#
# BASELINE is a commit (default 7e6622a: the build whose rates the simulation-speed target
# quotes, 4.4M to 5.5M transfers per wall second); ROUNDS (default 6) is how many times the
# two builds' `simrate` run in turn, the order swapped every round. Each `simrate` run is the
# median of five runs of each of seed 003's scenarios. Prints, for each scenario both builds
# have, every round's rates, the median of the rounds' ratios (this build over the
# baseline) and the ratio of each build's best rate (its rate when the host was quietest). Builds the baseline once, in a worktree under target/simrate-baseline/. A
# benchmark, run by hand: not part of the test command.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-7e6622a}
rounds=${2:-6}
case $rounds in '' | *[!0-9]* | 0) echo "simrate-vs: ROUNDS must be a whole number from 1 up, got '$rounds'" >&2; exit 2 ;; esac
rev=$(git rev-parse --verify --quiet "$base^{commit}") || {
  echo "simrate-vs: BASELINE '$base' is not a commit of this repository" >&2
  exit 2
}
tree="target/simrate-baseline/$rev"
if [ ! -d "$tree" ]; then
  echo "simrate-vs: checking out $base in $tree" >&2
  git worktree add --detach --quiet "$tree" "$rev"
fi
echo "simrate-vs: building both simulators (release)" >&2
(cd "$tree" && cargo build --release --quiet -p dmalab-sim --example simrate)
cargo build --release --quiet -p dmalab-sim --example simrate
old="$tree/target/release/examples/simrate"
new="target/release/examples/simrate"
# Seed 003's scenarios of the baseline; this build's simrate runs just those.
names=$("$old" | awk '{print $1}' | tr '\n' ' ')
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for i in $(seq 1 "$rounds"); do
  echo "simrate-vs: round $i of $rounds" >&2
  if [ $((i % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for b in $order; do
    if [ "$b" = old ]; then "$old"; else "$new" $names; fi | awk -v b="$b" -v r="$i" '{print r, b, $1, $2}' >>"$out"
  done
done
python3 - "$out" "$base" <<'EOF'
import statistics
import sys

rows = [line.split() for line in open(sys.argv[1])]
rate = {(r, b, name): float(v) for r, b, name, v in rows}
names = sorted({name for _, _, name, _ in rows}, key=[n for _, _, n, _ in rows].index)
rounds = sorted({int(r) for r, _, _, _ in rows})
print(f"M transfers per wall second, this build against {sys.argv[2]}, {len(rounds)} rounds")
for name in names:
    pairs = [(rate[(str(r), "old", name)], rate[(str(r), "new", name)]) for r in rounds]
    ratios = [n / o for o, n in pairs]
    print(
        f"{name:<22} baseline {' '.join(f'{o:5.2f}' for o, _ in pairs)}\n"
        f"{'':<22} this     {' '.join(f'{n:5.2f}' for _, n in pairs)}\n"
        f"{'':<22} ratio    {' '.join(f'{x:5.2f}' for x in ratios)}"
        f"   median {statistics.median(ratios):.2f}x\n"
        f"{'':<22} best rate of each build: {max(o for o, _ in pairs):.2f} and "
        f"{max(n for _, n in pairs):.2f}, {max(n for _, n in pairs) / max(o for o, _ in pairs):.2f}x"
    )
EOF
