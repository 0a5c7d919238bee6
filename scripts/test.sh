#!/usr/bin/env bash
# The test command of README.md: sets the host up (engine, base image), then runs every test.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec python3 -m pytest "$@"
