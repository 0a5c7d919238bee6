"""`invoke` in the repo root: the tasks are declared once, in harness/tasks.py (the same collection
`python -m harness` and `nccl-harness` run); this file only exposes it."""

from invoke import Collection

import harness.tasks

ns = Collection.from_module(harness.tasks)
