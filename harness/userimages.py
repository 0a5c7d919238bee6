"""The user's own images as stacks (`image:` in matrix.yaml), read before anything runs: each image is
found on the engine (pulled when missing), a probe container asks its Python what it holds
(imagefacts.py), and the stack is filled in with those versions, so its cells show them like any other
stack's and a re-pushed tag is a different image (its content id is part of what the record keeps).
An image that cannot be pulled, or has no Python or no torch, stops the run before any cell (exit 2)."""

from __future__ import annotations

from dataclasses import replace

from . import imagefacts
from .engines.dockerclient import LABEL, DockerClient, DockerFailure
from .errors import HarnessError
from .matrix import Cell, Stack
from .progress import Progress

# Installed from the wheel store into an image that has no Accelerate and whose stack pins none: the
# release this harness is tested with (matrix-cpu.yaml, the H200 machine's own stack).
DEFAULT_ACCELERATE = "1.15.0"
PROBE_TIMEOUT_S = 300  # an NGC image's first start unpacks layers; importing torch takes seconds


def read(stack: Stack, client: DockerClient, progress: Progress, where: str = "matrix.yaml") -> Stack:
    """The image stack with what its image holds; HarnessError (exit 2) naming the stack and the fix."""
    ref = stack.image
    head = f"{where}: stack `{stack.id}`: image `{ref}`"
    if not client.image_exists(ref):
        progress.say(f"stack {stack.id}: {ref} is not on this engine; pulling it")
        try:
            client.pull(ref)
        except DockerFailure as exc:
            raise HarnessError(f"{head} is not on this engine and cannot be pulled ({exc}). Fix: pull or load it first "
                               f"(docker pull {ref}, or docker load -i FILE), or correct `image:`.") from None
    image_id, digest = client.image_id(ref), client.repo_digest(ref)
    try:
        result = client.run_once(ref, imagefacts.probe_command(stack.python_path), timeout=PROBE_TIMEOUT_S,
                                 labels={f"{LABEL}.probe": "image"}, environment=imagefacts.PROBE_ENV)
    except DockerFailure as exc:
        raise HarnessError(f"{head} cannot start a container ({exc}). Fix: check that it runs "
                           f"(docker run --rm {ref} python3 -V).") from None
    if result.timed_out:
        raise HarnessError(f"{head}: its Python did not answer within {PROBE_TIMEOUT_S} s. Fix: check that it runs "
                           f"(docker run --rm {ref} python3 -c 'import torch').")
    try:
        facts = imagefacts.parse(result.exit_code or 0, result.output, image_id, digest, stack.python_path)
    except imagefacts.ProbeProblem as exc:
        raise HarnessError(f"{head} has {exc.what}. Fix: {exc.fix}.") from None
    found = replace(stack, cuda=facts.cuda or "cpu", torch=facts.torch, nccl=facts.nccl or "bundled",
                    accelerate=stack.accelerate or facts.accelerate or DEFAULT_ACCELERATE, python=facts.python_mm,
                    facts=facts)
    progress.say(f"stack {stack.id}: {ref} ({image_id[:19]}) holds {describe(found)}")
    return found


def describe(stack: Stack) -> str:
    """What an image stack runs, as the progress line and the dry run say it."""
    found = stack.facts
    if found is None:
        return "(not read yet)"
    acc = (f"Accelerate {stack.accelerate} from the wheel store (the image has {found.accelerate or 'none'})"
           if installs_accelerate(stack) else f"Accelerate {found.accelerate}")
    cuda = f"CUDA {found.cuda}" if found.cuda else "CPU"
    nccl = f", NCCL {found.nccl}" if found.nccl else ""
    return f"Python {found.python}, torch {found.torch} ({cuda}{nccl}), {acc}; {found.distro or 'distribution unknown'}"


def installs_accelerate(stack: Stack) -> bool:
    """Whether the thin layer installs Accelerate: the image has none, or another than the stack pins."""
    return stack.facts is not None and stack.facts.accelerate != stack.accelerate


def resolve(cells: list[Cell], client: DockerClient, progress: Progress, where: str = "matrix.yaml") -> list[Cell]:
    """The cells with each image stack read once (the others as they are)."""
    read_stacks: dict[str, Stack] = {}
    for cell in cells:
        if cell.stack.is_image and cell.stack.id not in read_stacks:
            read_stacks[cell.stack.id] = read(cell.stack, client, progress, where)
    return [replace(c, stack=read_stacks[c.stack.id]) if c.stack.id in read_stacks else c for c in cells]
