"""Users' own images for tests, made the way a site makes its training image: the local Debian base with
torch's CPU wheel and an Accelerate installed into a venv of its own (not the harness's /opt/venv, no
workload, no harness labels but the test's), tagged like a site's image. The wheels come from the
harness's wheel store (the same locked files as the CPU stack of matrix-cpu.yaml)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from harness import images, matrix, wheelhouse
from harness.engines.dockerclient import DockerClient

SITE_LABEL = "io.nccl-harness-test.site"  # every image made here carries it: the fixture removes them by it

DOCKERFILE = """FROM {base}
LABEL {label}="{token}"
COPY wheels/ /tmp/wheels/
RUN python3 -m venv /opt/site && /opt/site/bin/pip install -q --no-index --find-links /tmp/wheels {reqs} && rm -rf /tmp/wheels
ENV PATH=/opt/site/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
"""


UPGRADE = """FROM {base}
LABEL {label}="{token}"
COPY wheels/ /tmp/wheels/
RUN /opt/site/bin/pip install -q --no-index --find-links /tmp/wheels {reqs} && rm -rf /tmp/wheels
"""


def build_site_image(client: DockerClient, tag: str, accelerate: str, token: str, log: Path,
                     base: str = "harness-base:bookworm", over: str | None = None) -> str:
    """A site image with torch 2.13.0 (CPU) and `accelerate`; returns its content id. `over`: a site image to
    take this month's image from, with only another Accelerate installed (as a site's image of next month
    shares its layers with this month's; half the build, and half the disk to free again)."""
    stack = matrix.Stack("cpu", "2.13.0", accelerate, base=base, python="3.11",
                         torch_index="https://download.pytorch.org/whl/cpu", template="cpu")
    reqs = images.requirements(stack)
    wheels = wheelhouse.collect(wheelhouse.DEFAULT_STORE, reqs, stack.python, stack.torch_index, log)
    if over is not None:
        reqs = [r for r in reqs if r.startswith("accelerate")]
        wheels = [w for w in wheels if w.name.startswith("accelerate-")]
    with tempfile.TemporaryDirectory(prefix="site-image-") as tmp:
        ctx = Path(tmp)
        (ctx / "wheels").mkdir()
        for wheel in wheels:
            try:
                os.link(wheel, ctx / "wheels" / wheel.name)
            except OSError:  # another filesystem
                shutil.copy2(wheel, ctx / "wheels" / wheel.name)
        (ctx / "Dockerfile").write_text((UPGRADE if over else DOCKERFILE).format(
            base=over or base, label=SITE_LABEL, token=token, reqs=" ".join(f"'{r}'" for r in reqs)))
        return client.build(ctx, tag, labels={SITE_LABEL: token}, buildargs={}, log=log)
