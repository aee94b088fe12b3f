#!/usr/bin/env bash
# Install what dmalab needs into ./.venv (idempotent): the Python package with its Rust core,
# built in release mode, and the development tools.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[dev]"
