# CPU stack: gloo ranks on a locally made Debian base (no registry needed). Classic builder syntax only.
FROM harness-base:bookworm
LABEL io.nccl-harness.stack="cpu-torch2.13.0-acc1.15.0" \
io.nccl-harness.cuda="cpu" \
io.nccl-harness.torch="2.13.0" \
io.nccl-harness.accelerate="1.15.0" \
io.nccl-harness.nccl="bundled" \
io.nccl-harness.nccl-via="bundled" \
io.nccl-harness.python="3.11" \
io.nccl-harness.base="harness-base:bookworm" \
io.nccl-harness.harness-version="0.1.0"
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1
# The locked wheels of this stack, resolved and downloaded on the host (the wheel store): pip fetches
# nothing during the build, and a rebuild installs the very same files.
COPY wheels/ /tmp/wheels/
RUN pip install --no-index --find-links /tmp/wheels torch==2.13.0 accelerate==1.15.0
RUN rm -rf /tmp/wheels
COPY workload/ /opt/harness/workload/
# Fail the build, not the first cell, when the stack cannot even be imported.
RUN python -c "import torch, accelerate; print('torch', torch.__version__, 'accelerate', accelerate.__version__)"
WORKDIR /opt/harness
