"""Entry script of the NCCL-only control (nccl_control.py): launchers run this file directly, as they
run ``run.py`` for the workload. Python put this folder first on ``sys.path``, so ``run`` is found as a
top-level module here; its ``entry`` makes the ``workload`` package importable and exits with the code."""
from run import entry  # type: ignore[import-not-found]  # this folder is on sys.path when run

if __name__ == "__main__":
    entry("nccl_control")
