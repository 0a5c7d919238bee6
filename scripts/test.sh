#!/usr/bin/env bash
# The test command of README.md: sets the host up (engine, base image), lints (ruff, mypy), then runs every test.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the type checker and the linter first: a finding fails the run before the suite's minutes are spent
bash scripts/lint.sh
exec python3 -m pytest "$@"
