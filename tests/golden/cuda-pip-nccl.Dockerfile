# CUDA stack on an nvidia/cuda base (or a local stand-in that has python3). Classic builder syntax only.
FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
LABEL io.nccl-harness.stack="cu12.4.1-torch2.5.1-acc1.2.1-nccl2.21.5" \
io.nccl-harness.cuda="12.4.1" \
io.nccl-harness.torch="2.5.1" \
io.nccl-harness.accelerate="1.2.1" \
io.nccl-harness.nccl="2.21.5" \
io.nccl-harness.nccl-via="pip" \
io.nccl-harness.python="3.10" \
io.nccl-harness.base="nvidia/cuda:12.4.1-runtime-ubuntu22.04" \
io.nccl-harness.harness-version="0.1.0"
ENV DEBIAN_FRONTEND=noninteractive
# nvidia/cuda images ship no Python: take the distribution's (and elfutils' eu-stack: a hung rank's
# native stacks, NCCL's own threads too; the local bases carry it already).
RUN python3 -c "import venv, ensurepip" 2>/dev/null || ( \
      apt-get update && \
      apt-get install -y --no-install-recommends python3 python3-venv python3-pip elfutils && \
      rm -rf /var/lib/apt/lists/* )
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1
# The locked wheels of this stack, resolved and downloaded on the host (the wheel store): pip fetches
# nothing during the build, and a rebuild installs the very same files.
COPY wheels/ /tmp/wheels/
RUN pip install --no-index --find-links /tmp/wheels torch==2.5.1 accelerate==1.2.1
# Torch loads its NCCL through an RPATH into this package: replacing the package replaces the library.
RUN pip install --no-index --find-links /tmp/wheels --no-deps "nvidia-nccl-cu12==2.21.5"
RUN rm -rf /tmp/wheels
COPY workload/ /opt/harness/workload/
# Fail the build, not the first cell, when the stack cannot even be imported.
RUN python -c "import torch, accelerate; print('torch', torch.__version__, 'accelerate', accelerate.__version__)"
WORKDIR /opt/harness
