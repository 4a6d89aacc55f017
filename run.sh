#!/usr/bin/env bash
# pytest-xla-dynamo: set up ./.venv if needed, then run the suites or the tests.
#   ./run.sh suite [pytest args]   the conformance suites, --xla-backend=trace_once, small tier (two xdist
#                                  workers where the machine has the cores and the memory, else one process)
#   ./run.sh test  [pytest args]   lint, types and the plugin's own tests
# Idempotent: the venv is reused, and reinstalled only when pyproject.toml changes.
set -euo pipefail
cd "$(dirname "$0")"

setup() {
  local py="${PYTHON:-}"
  if [ -z "$py" ]; then
    for candidate in python3.11 python3; do
      if command -v "$candidate" >/dev/null 2>&1; then py="$candidate"; break; fi
    done
  fi
  [ -n "$py" ] || { echo "run.sh: no python3.11 or python3 on PATH" >&2; exit 1; }
  if [ ! -x .venv/bin/python ]; then
    echo "run.sh: creating .venv with $($py --version)"
    "$py" -m venv .venv || { echo "run.sh: '$py -m venv' failed (on Debian: apt-get install python3-venv)" >&2; exit 1; }
  fi
  local stamp=".venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)"
  if [ ! -f "$stamp" ]; then
    echo "run.sh: installing torch 2.9.0, torch_xla 2.9.0 and the plugin into .venv (a few minutes, ~7 GB)"
    .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[xla,families,dev]"
    rm -f .venv/.installed-*
    touch "$stamp"
  fi
  export PJRT_DEVICE="${PJRT_DEVICE:-CPU}"
  # one malloc arena: glibc's per-thread arenas keep freed memory the main job's peak does not need
  # (vgg16's training tests alone: 5.61 GB with the default arenas, 5.28 GB with one; docs/ci.md#memory)
  export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-1}"
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  suite)
    setup
    # two pytest-xdist workers where the cores and the memory allow, else one process; one line says which and
    # why (XLA_SUITE_WORKERS=1|2|auto; -n or -p no:xdist in the arguments wins; docs/ci.md#memory)
    workers=$(.venv/bin/python -m pytest_xla_dynamo.workers.suite_workers "$@")
    # shellcheck disable=SC2086  # "-n 2" or nothing
    exec .venv/bin/pytest suites --xla-backend=trace_once $workers "$@"
    ;;
  test)
    setup
    .venv/bin/ruff check pytest_xla_dynamo tests suites benchmarks
    .venv/bin/mypy
    exec .venv/bin/pytest tests -n 2 "$@"
    ;;
  *)
    echo "usage: ./run.sh suite|test [pytest args]" >&2
    exit 2
    ;;
esac
