#!/usr/bin/env bash
# Set up, then run every check and test: Rust (format, lints, unit, property, stress and doc
# tests, API docs built without warnings) and Python (format, lints, types, the stub against
# the native module, pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n== %s\n' "$*" >&2; }

step "setup"
bash scripts/setup.sh

step "cargo fmt"
cargo fmt --all -- --check
step "cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
step "cargo test"
# dmalab-py is a Python extension: it links against the interpreter that loads it and is tested
# from Python below.
cargo test --workspace --exclude dmalab-py --quiet
step "cargo test: dmalab-iova without its default features"
# The portable fallbacks of the process-wide mechanisms (symmetric fences, thread_local!), as an
# embedder who turns the features off gets them.
cargo test -p dmalab-iova --no-default-features --quiet
step "loom: segtree's owner/thief protocol"
# Model checks of the per-thread caches' cross-thread protocol (module `loom_model` in
# crates/dmalab-iova/src/segtree/owned.rs and spin.rs): under --cfg loom the atomics and the
# cached value's cell are loom's, which explores every interleaving and memory ordering the
# models allow. The cfg rebuilds every dependency, so it has its own target dir; only the lib's
# loom_model tests run (the others need real threads).
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test --release -p dmalab-iova --lib --quiet loom_model
step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --exclude dmalab-py --no-deps --quiet

step "ruff"
.venv/bin/ruff format --check python tests/python
.venv/bin/ruff check python tests/python
step "mypy"
.venv/bin/mypy
step "stubtest"
.venv/bin/python -m mypy.stubtest dmalab._native
step "wheel"
# The named scenarios must work from an installed wheel, not only from the source tree: build
# one, install it into a fresh environment, and trace a built-in scenario from elsewhere.
rm -rf target/wheel-check && mkdir -p target/wheel-check
.venv/bin/python -m pip wheel --quiet --no-deps -w target/wheel-check .
python3 -m venv target/wheel-check/venv
target/wheel-check/venv/bin/python -m pip install --quiet target/wheel-check/dmalab-*.whl
(cd target/wheel-check && venv/bin/dmalab trace p1-tx-unaligned --format json >/dev/null)
echo "dmalab trace p1-tx-unaligned works from an installed wheel" >&2

step "chromium and chromedriver (the HTML report's browser test)"
# From the distribution's packages; a machine without apt-get or root skips that one test
# (CI=true makes it fail instead).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null
  elif command -v apt-get >/dev/null && command -v sudo >/dev/null; then
    sudo apt-get update -q >/dev/null
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null
  else
    echo "chromium and chromedriver cannot be installed here: the browser test is skipped" >&2
  fi
fi

step "datasheet check"
# Every built-in device on every host with a PCIe slot: a device that cannot reach its own
# datasheet rating by its own parts fails the run.
.venv/bin/dmalab platforms --check >/dev/null
echo "dmalab platforms --check: no device falls short of its rating by its own parts" >&2

step "pytest"
.venv/bin/python -m pytest -q
