"""`python -m harness`: the invoke tasks of harness/tasks.py through harness.cli's Program."""

import sys

from .cli import main

sys.exit(main(binary="python -m harness"))
