#!/usr/bin/env bash
# Set up, then run dmalab's main job on built-in defaults (extra arguments go to it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >&2
exec .venv/bin/dmalab bench iova --quick "$@"
