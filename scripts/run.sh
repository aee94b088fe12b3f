#!/usr/bin/env bash
# Set up, then run dmalab's main job on built-in defaults: reproduce every published claim that
# dmalab models. With arguments, run `dmalab ARGS...` instead (such as `bench iova --quick`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >&2
if [ "$#" -eq 0 ]; then
  set -- reproduce
fi
exec .venv/bin/dmalab "$@"
