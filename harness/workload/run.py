"""Entry script: ``accelerate launch``/``torchrun``/``python`` run this file directly.

The folder is shipped as ``/opt/harness/workload/`` with no installed package, so this script
puts the folder's PARENT on ``sys.path`` and imports the ``workload`` package by that name. It is
the only file that names the package; every other module uses relative imports.
"""
import os
import sys
from typing import Callable

_HERE = os.path.dirname(os.path.abspath(__file__))
_PARENT = os.path.dirname(_HERE)


def _fix_sys_path() -> None:
    """Make ``workload`` importable and stop sibling modules shadowing top-level names."""
    # Python put this script's own folder first; its modules (events, cli, ...) must only be
    # reachable as ``workload.X``, never as top-level modules that could shadow others.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    sys.path.insert(0, _PARENT)


def _import_main(module: str = "main") -> Callable[[], int]:
    """``workload.<module>.main``: the workload's (run.py) or the NCCL-only control's (control.py)."""
    _fix_sys_path()
    try:
        main = __import__("workload." + module, fromlist=["main"]).main
    finally:
        # Once imported, the package resolves its modules through __path__; drop the parent so
        # its other contents (in the repo: the rest of ``harness``) cannot shadow anything.
        if sys.path and sys.path[0] == _PARENT:
            del sys.path[0]
    return main


def entry(module: str = "main") -> None:
    """Run ``workload.<module>.main()`` and exit with its code."""
    code = _import_main(module)()
    # Exit hard: after a collective failure, NCCL/gloo threads can block interpreter shutdown,
    # and every event is already fsync'd, so there is nothing left to flush but stdio.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
