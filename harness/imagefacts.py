"""What a user's own image holds (an `image:` stack: an NGC PyTorch container, a site's training image),
as a probe container reads it before anything is built: the Python it provides, its torch, CUDA, NCCL
and Accelerate, its distribution, and the image's identity. Pure: the probe's command and the parse of
what it printed; harness/userimages.py runs it through the Docker client."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

# In the thin layer over a user's image: the wrapper that runs the image's own Python, the one name the
# launcher and the dry run use for it (images/image.Dockerfile.j2 writes it).
IMAGE_PYTHON = "/opt/harness/python"
MARK = "HARNESS-IMAGE-FACTS "  # the probe's one line of JSON; NGC's entrypoint prints a banner before it
NO_PYTHON = 127  # the probe's exit code when no Python was found (the shell's "command not found")

# Runs with the image's Python; prints one line. torch is imported, never initialised on a GPU: the probe
# container gets no GPUs. torch.cuda.nccl.version() is the NCCL torch was built with (FIELD-NOTES: what
# loads can differ; the cell's fingerprint records the loaded one).
_CODE = r"""
import json, platform, sys
facts = {"python_path": sys.executable, "python": platform.python_version(), "distro": None,
         "torch": None, "torch_error": None, "cuda": None, "nccl": None, "accelerate": None}
try:
    for line in open("/etc/os-release"):
        if line.startswith("PRETTY_NAME="):
            facts["distro"] = line.split("=", 1)[1].strip().strip('"')
except OSError:
    pass
try:
    import torch
    facts["torch"], facts["cuda"] = torch.__version__, torch.version.cuda
    try:
        v = torch.cuda.nccl.version()
        facts["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:
        pass
except Exception as exc:
    facts["torch_error"] = f"{type(exc).__name__}: {exc}"[:300]
try:
    import importlib.metadata as md
    facts["accelerate"] = md.version("accelerate")
except Exception:
    pass
print("MARK" + json.dumps(facts), flush=True)
""".replace("MARK", MARK)


def probe_command(python: str = "") -> list[str]:
    """The probe container's command: the named Python, else python3, else python on the image's PATH."""
    candidates = shlex.quote(python) if python else "python3 python"
    script = (f"for p in {candidates}; do if command -v \"$p\" >/dev/null 2>&1; then exec \"$p\" -c \"$HARNESS_CODE\"; fi; "
              f"done; echo 'no python'; exit {NO_PYTHON}")
    return ["sh", "-c", script]


PROBE_ENV = {"HARNESS_CODE": _CODE}


@dataclass(frozen=True)
class ImageFacts:
    """What one image holds, and which image it is."""

    image_id: str  # the engine's content id (sha256:...): what ran, whatever the tag points at later
    digest: str = ""  # the registry's reference by digest (repo@sha256:...), when the image came from one
    python_path: str = ""
    python: str = ""  # e.g. 3.12.3
    torch: str = ""
    cuda: str = ""  # "" for a CPU build of torch
    nccl: str = ""  # the NCCL torch was built with
    accelerate: str = ""  # "" when the image has none
    distro: str = ""

    @property
    def python_mm(self) -> str:
        return ".".join(self.python.split(".")[:2])


class ProbeProblem(Exception):
    """What the probe's output says is missing; the caller adds the stack and the fix."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(what)
        self.what, self.fix = what, fix


def parse(exit_code: int, output: str, image_id: str, digest: str = "", python: str = "") -> ImageFacts:
    """The probe's output as facts, or ProbeProblem naming what is missing (no Python, no torch)."""
    line = next((l for l in output.splitlines() if l.startswith(MARK)), None)
    if line is None:
        if exit_code == NO_PYTHON or "no python" in output:
            where = f"no Python at `{python}`" if python else "no Python (looked for python3 and python on its PATH)"
            fix = ("correct `python:` in the stack (a path inside the image, or a command on its PATH)" if python
                   else "name the image's Python with `python: /path/to/python` in the stack")
            raise ProbeProblem(where, fix)
        tail = " ".join(output.strip().splitlines()[-3:])[-300:]
        raise ProbeProblem(f"its Python could not be asked what the image holds (exit {exit_code}: {tail or 'no output'})",
                           "check that the image runs a command it is given (docker run --rm IMAGE python3 -V): its ENTRYPOINT "
                           "is kept (NGC's sets up CUDA's forward compatibility), so one that does not exec its "
                           "arguments would stop every cell too")
    try:
        found = json.loads(line[len(MARK):])
    except ValueError:
        raise ProbeProblem(f"the probe's answer was cut short: {line[:200]}", "run it again") from None
    text = {k: str(v) if v is not None else "" for k, v in found.items()} if isinstance(found, dict) else {}
    if not text.get("torch"):
        why = text.get("torch_error") or "torch cannot be imported"
        raise ProbeProblem(f"no torch for {text.get('python_path') or 'its Python'} ({why})",
                           "use an image with torch installed, or name the Python that has it with `python:` in the stack")
    return ImageFacts(image_id=image_id, digest=digest, python_path=text.get("python_path", ""),
                      python=text.get("python", ""), torch=text["torch"], cuda=text.get("cuda", ""),
                      nccl=text.get("nccl", ""), accelerate=text.get("accelerate", ""), distro=text.get("distro", ""))
