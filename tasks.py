"""The harness's invoke tasks for the `invoke` binary. They are declared in harness/tasks.py (the same
collection `python -m harness` and `nccl-harness` run). invoke's own Program imports this file before it
parses the task flags; `take_over_invoke` hands the command line to harness.cli's Program there, so a
typo'd flag or a bad value is exit 2 with the flag and the fix, as from every entry point. `ns` is the
collection for anything else that imports this file."""

from invoke import Collection

import harness.tasks
from harness.cli import take_over_invoke

take_over_invoke()

ns = Collection.from_module(harness.tasks)
