#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run them (extra args go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# torch first, pinned: 2.13.0 is a local CPU wheel here; an unpinned torch pulls a multi-GB CUDA build.
"$VENV/bin/pip" install -q torch==2.13.0
# The transformers extra too: the meta-device checks of model families (tests/test_families.py, models check) run in CI.
"$VENV/bin/pip" install -q -e '.[test,transformers]'
# Debian's headless Chromium for the HTML report test; that test skips (saying why) if it cannot be had.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
    || echo "note: could not install chromium; the browser test will skip" >&2
fi
exec "$VENV/bin/python" -m pytest -q "$@"
