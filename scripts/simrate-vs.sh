#!/usr/bin/env bash
# The simulator's speed against an earlier build, in one command, so that the host's speed
# cancels out: this machine kind runs the same build from one minute to the next at rates
# that differ by up to 2x, so a rate in transfers per wall second says as much about the host
# as about the code.
#
#   bash scripts/simrate-vs.sh [BASELINE] [ROUNDS] [NAMES]
#
# BASELINE is a commit (default 7e6622a: the build whose rates the simulation-speed target
# quotes, 4.4M to 5.5M transfers per wall second); ROUNDS (default 6) is how many times the
# two builds' `simrate` run in turn, the order swapped every round; NAMES (default: seed 003's
# scenarios, `p3-*`) is a comma-separated list of the scenarios to run, which both builds'
# `simrate` must know (`grace-nvme8-*`, the storage server's 10M-I/O runs, take about 7 s a
# run). Each `simrate` run is the median of five runs (three for the storage server).
# Prints, for each scenario, every round's figures (M transfers per wall second, or wall
# seconds for the storage server), the median of the rounds' speed-ups (this build against
# the baseline: rate over rate, or seconds over seconds inverted) and the speed-up of each
# build's best figure (when the host was quietest). Builds the baseline once, in a worktree
# under target/simrate-baseline/. A benchmark, run by hand: not part of the test command.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-7e6622a}
rounds=${2:-6}
names_arg=${3:-}
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
if [ -n "$names_arg" ]; then
  names=${names_arg//,/ }
else
  # Seed 003's scenarios (a baseline whose simrate takes no names runs those alone).
  names=$(cd scenarios && ls p3-*.toml | sed 's/\.toml$//' | tr '\n' ' ')
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for i in $(seq 1 "$rounds"); do
  echo "simrate-vs: round $i of $rounds" >&2
  if [ $((i % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for b in $order; do
    # shellcheck disable=SC2086 # NAMES is split into the scenarios' names.
    if [ "$b" = old ]; then "$old" $names; else "$new" $names; fi |
      awk -v b="$b" -v r="$i" '{print r, b, $1, $2, ($0 ~ /wall seconds/ ? "s" : "rate")}' >>"$out"
  done
done
python3 - "$out" "$base" <<'EOF'
import statistics
import sys

rows = [line.split() for line in open(sys.argv[1])]
value = {(r, b, name): float(v) for r, b, name, v, _ in rows}
unit = {name: u for _, _, name, _, u in rows}
rounds = sorted({int(r) for r, _, _, _, _ in rows})
# The scenarios both builds ran in every round, in the order they ran.
names = [
    n
    for n in dict.fromkeys(name for _, _, name, _, _ in rows)
    if all((str(r), b, n) in value for r in rounds for b in ("old", "new"))
]
print(f"this build against {sys.argv[2]}, {len(rounds)} rounds")
for name in names:
    pairs = [(value[(str(r), "old", name)], value[(str(r), "new", name)]) for r in rounds]
    secs = unit[name] == "s"
    # A speed-up: rate over rate, or the baseline's seconds over this build's.
    ups = [o / n if secs else n / o for o, n in pairs]
    best_o, best_n = (min if secs else max)(o for o, _ in pairs), (min if secs else max)(
        n for _, n in pairs
    )
    what = "wall seconds for 10M I/Os" if secs else "M transfers per wall second"
    print(
        f"{name:<24} {what}\n"
        f"{'':<24} baseline {' '.join(f'{o:5.2f}' for o, _ in pairs)}\n"
        f"{'':<24} this     {' '.join(f'{n:5.2f}' for _, n in pairs)}\n"
        f"{'':<24} speed-up {' '.join(f'{x:5.2f}' for x in ups)}"
        f"   median {statistics.median(ups):.2f}x\n"
        f"{'':<24} best of each build: {best_o:.2f} and {best_n:.2f}, "
        f"{(best_o / best_n if secs else best_n / best_o):.2f}x"
    )
EOF
