#!/usr/bin/env bash
# Install what dmalab needs into ./.venv (idempotent): the Python package with its Rust core,
# built in release mode, and the development tools. Says what it does on stderr, with the time
# it has taken every 20 seconds while pip and the Rust build are at work.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'dmalab setup: %s\n' "$*" >&2; }
start=$SECONDS
if [ ! -x .venv/bin/python ]; then
  say "creating the environment ./.venv"
  python3 -m venv .venv
  first=1
else
  first=0
fi
.venv/bin/python -m pip install --quiet --upgrade pip
if [ "$first" = 1 ]; then
  say "installing packages and building the Rust core in release mode: about 3 to 5 minutes" \
    "the first time on 2 cores, seconds on later runs"
else
  say "updating ./.venv and rebuilding the Rust core if it changed"
fi
( while sleep 20; do say "still at work ($((SECONDS - start)) s)"; done ) &
ticker=$!
trap 'kill "$ticker" 2>/dev/null || true' EXIT
.venv/bin/python -m pip install --quiet -e ".[dev]"
kill "$ticker" 2>/dev/null || true
say "ready in $((SECONDS - start)) s: .venv/bin/dmalab"
