#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run them (extra args go to pytest).
# Work already done is not redone: the pip installs are skipped while the venv's stamp matches
# pyproject.toml and the torch pin (and kvplan imports from this tree), Chromium's install while it is there.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
TORCH=torch==2.13.0

# Debian's headless Chromium for the HTML report tests; they skip (saying why) if it cannot be had.
# It installs in the background while pip works, and the tests wait for it.
chromium_job=
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
   && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
    || echo "note: could not install chromium; the browser tests will skip" >&2; } &
  chromium_job=$!
fi

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
stamp="$VENV/.kvplan-test-deps"
want="$TORCH $(sha256sum pyproject.toml | cut -d' ' -f1)"
here=$("$VENV/bin/python" -I -c 'import kvplan, os; print(os.path.dirname(os.path.realpath(kvplan.__file__)))' 2>/dev/null || true)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ "$here" != "$(pwd -P)/kvplan" ]; then
  # torch first, pinned: 2.13.0 is a local CPU wheel here; an unpinned torch pulls a multi-GB CUDA build.
  "$VENV/bin/pip" install -q "$TORCH"
  # The transformers extra too: the meta-device checks of model families (tests/test_families.py, models check) run in CI.
  "$VENV/bin/pip" install -q -e '.[test,transformers]'
  echo "$want" > "$stamp"
fi

[ -z "$chromium_job" ] || wait "$chromium_job"
# The whole suite runs on two workers where the machine has two cores or more (benchmarks/README.md "The
# test suite": less wall time for a little more CPU, as the second worker imports torch again); KVPLAN_TEST_WORKERS=0
# runs it in one process. Named tests (arguments given) run in one process, as asked.
workers=${KVPLAN_TEST_WORKERS:-$(( $(nproc) >= 2 ? 2 : 0 ))}
if [ $# -eq 0 ] && [ "$workers" -gt 0 ]; then
  exec "$VENV/bin/python" -m pytest -q -n "$workers" --dist worksteal
fi
exec "$VENV/bin/python" -m pytest -q "$@"
