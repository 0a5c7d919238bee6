"""The canonical workload: the program that runs inside every container (and on the host).

It depends only on the standard library, torch and accelerate, and never imports the rest of
the ``harness`` package: the folder is copied into images as ``/opt/harness/workload/`` and run
as a script through ``run.py``. Modules here use relative imports only, and this file imports
nothing, so that importing the package stays cheap and torch-free.
"""
