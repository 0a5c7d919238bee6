#!/usr/bin/env bash
# Lint: ruff over the harness and its tests, mypy over the harness (config in pyproject.toml).
# Exit non-zero when either has a finding. Run from anywhere; it works in the repo root.
set -u
cd "$(dirname "$0")/.."
status=0
ruff check harness tests || status=1
mypy harness || status=1
exit "$status"
