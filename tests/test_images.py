"""Rendering build contexts: what goes into an image and what decides its tag. Pure and fast."""

from __future__ import annotations

import json
import shutil

from harness import images, matrix, wheelhouse


def _stack(**kw) -> matrix.Stack:
    base = dict(
        cuda="12.4.1", torch="2.5.1", accelerate="1.2.1", base="nvidia/cuda:12.4.1-runtime-ubuntu22.04",
        python="3.10", torch_index="https://download.pytorch.org/whl/cu124", template="cuda",
    )
    return matrix.Stack(**(base | kw))


CPU = dict(cuda="cpu", torch="2.13.0", accelerate="1.15.0", base="harness-base:bookworm", python="3.11",
           torch_index="https://download.pytorch.org/whl/cpu", template="cpu")


def test_tag_is_stable_and_names_the_stack():
    a = images.render(_stack(), images.BuildOptions())
    b = images.render(_stack(), images.BuildOptions())
    assert a.digest == b.digest
    assert a.tag == f"nccl-harness/cu12.4.1-torch2.5.1-acc1.2.1:{a.digest[:16]}"


def test_every_version_changes_the_tag():
    tags = {images.render(_stack(**kw), images.BuildOptions()).tag for kw in
            [{}, {"torch": "2.4.1"}, {"accelerate": "1.0.1"}, {"nccl": "2.21.5", "nccl_via": "pip"}, {"cuda": "12.1.1"}]}
    assert len(tags) == 5


def test_cuda_template_installs_the_locked_wheels_offline_and_copies_the_workload():
    ctx = images.render(_stack(), images.BuildOptions())
    df = ctx.dockerfile
    assert df.startswith("# CUDA stack")
    assert "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04" in df
    assert "COPY wheels/ /tmp/wheels/\n" in df
    assert "RUN pip install --no-index --find-links /tmp/wheels torch==2.5.1 accelerate==1.2.1\n" in df
    assert "--index-url" not in df
    assert "COPY workload/ /opt/harness/workload/" in df
    assert 'io.nccl-harness.torch="2.5.1"' in df
    names = [n for n, _ in ctx.files]
    assert "workload/run.py" in names


def test_pinned_pip_nccl_replaces_the_bundled_package():
    df = images.render(_stack(nccl="2.23.4", nccl_via="pip"), images.BuildOptions()).dockerfile
    assert 'pip install --no-index --find-links /tmp/wheels --no-deps "nvidia-nccl-cu12==2.23.4"' in df
    assert "LD_PRELOAD" not in df


def test_system_nccl_is_preloaded():
    df = images.render(_stack(nccl="2.21.5", nccl_via="system"), images.BuildOptions()).dockerfile
    assert '"libnccl2=2.21.5-1+cuda12.4"' in df
    assert "ENV LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libnccl.so.2" in df


def test_old_torch_gets_numpy_below_2_and_old_accelerate_setuptools_below_70():
    df = images.render(_stack(torch="2.1.2", cuda="12.1.1"), images.BuildOptions()).dockerfile
    assert "/tmp/wheels torch==2.1.2 accelerate==1.2.1 'numpy<2'\n" in df
    df = images.render(_stack(torch="2.1.2", cuda="12.1.1", accelerate="0.24.1"), images.BuildOptions()).dockerfile
    assert "/tmp/wheels torch==2.1.2 accelerate==0.24.1 'numpy<2' 'setuptools<70'\n" in df
    assert "numpy" not in images.render(_stack(), images.BuildOptions()).dockerfile


def _store(folder, stack: matrix.Stack, contents: bytes = b"not really a wheel"):
    """A wheel store with a lock for the stack's requirements, as wheelhouse.collect leaves it."""
    folder.mkdir(parents=True)
    names = ["accelerate-1.15.0-py3-none-any.whl", "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    for name in names:
        (folder / name).write_bytes(contents + name.encode())
    key = wheelhouse.lock_key(images.requirements(stack), stack.python, stack.torch_index)
    (folder / wheelhouse.LOCKS).mkdir()
    (folder / wheelhouse.LOCKS / f"{key}.json").write_text(json.dumps({"wheels": names}))
    return folder


def test_the_tag_hashes_the_locked_wheels_not_the_store_they_lie_in(tmp_path, monkeypatch):
    """An image is named by what is in it: the same wheels give the same tag from the default store or
    from any --wheelhouse; other bytes under the same names give another tag. With the locks in place
    this needs no pip (a pip run would leave its log)."""
    stack = matrix.Stack(**CPU)
    monkeypatch.setattr(wheelhouse, "DEFAULT_STORE", _store(tmp_path / "default", stack))
    log = tmp_path / "pip.log"
    default = images.prepare(stack, images.BuildOptions(), log)
    elsewhere = images.prepare(stack, images.BuildOptions(wheelhouse=_store(tmp_path / "other", stack)), log)
    assert default.tag == elsewhere.tag
    assert [n for n, _ in default.files if n.startswith("wheels/")] == [
        "wheels/accelerate-1.15.0-py3-none-any.whl", "wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    rebuilt = images.prepare(stack, images.BuildOptions(wheelhouse=_store(tmp_path / "new", stack, b"other")), log)
    assert rebuilt.tag != default.tag
    assert not log.exists()


def test_ca_bundle_is_copied_for_apt_in_cuda_builds_and_leaves_cpu_images_alone(tmp_path):
    ca = tmp_path / "corp.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    ctx = images.render(_stack(nccl="2.21.5", nccl_via="system"), images.BuildOptions(ca_bundle=ca))
    assert ("harness-ca.crt", ca) in ctx.files
    assert "COPY harness-ca.crt /usr/local/share/harness-ca.crt" in ctx.dockerfile
    assert "-o Acquire::https::CAInfo=/usr/local/share/harness-ca.crt" in ctx.dockerfile
    # pip fetches nothing in a build (the wheels come from the store), so a CPU build has no use for it
    cpu = images.render(matrix.Stack(**CPU), images.BuildOptions(ca_bundle=ca))
    assert cpu.digest == images.render(matrix.Stack(**CPU), images.BuildOptions()).digest


def test_proxy_settings_do_not_change_the_tag(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    options = images.BuildOptions.from_env()
    assert ("HTTPS_PROXY", "http://proxy.invalid:3128") in options.proxy
    assert images.render(_stack(), options).digest == images.render(_stack(), images.BuildOptions()).digest


def test_changed_template_changes_only_its_images(tmp_path, monkeypatch):
    fake = tmp_path / "images"
    shutil.copytree(matrix.IMAGES_DIR, fake)
    monkeypatch.setattr(matrix, "IMAGES_DIR", fake)
    cuda, cpu = _stack(), matrix.Stack(**CPU)
    before = {s.template: images.render(s, images.BuildOptions()).digest for s in (cuda, cpu)}
    (fake / "cpu.Dockerfile.j2").write_text((fake / "cpu.Dockerfile.j2").read_text() + "ENV CHANGED=1\n")
    after = {s.template: images.render(s, images.BuildOptions()).digest for s in (cuda, cpu)}
    assert after["cuda"] == before["cuda"]
    assert after["cpu"] != before["cpu"]


def test_workload_change_changes_every_tag(tmp_path, monkeypatch):
    work = tmp_path / "workload"
    shutil.copytree(images.WORKLOAD_DIR, work, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(images, "WORKLOAD_DIR", work)
    before = images.render(_stack(), images.BuildOptions()).digest
    (work / "run.py").write_text((work / "run.py").read_text() + "\n# changed\n")
    assert images.render(_stack(), images.BuildOptions()).digest != before


def test_wheelhouse_lock_is_reused_without_pip(tmp_path):
    reqs = ["no-such-package-for-sure==1.0"]
    key = wheelhouse.lock_key(reqs, "3.11", "")
    (tmp_path / ".locks").mkdir()
    (tmp_path / "a-1.0-py3-none-any.whl").write_bytes(b"x")
    (tmp_path / ".locks" / f"{key}.json").write_text(json.dumps({"wheels": ["a-1.0-py3-none-any.whl"]}))
    got = wheelhouse.collect(tmp_path, reqs, "3.11", "", tmp_path / "log")
    assert got == [tmp_path / "a-1.0-py3-none-any.whl"]
    assert not (tmp_path / "log").exists()  # pip never ran


def test_big_file_hashes_are_kept_across_commands_and_redone_when_the_file_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(images, "HASH_CACHE", tmp_path / "cache" / "hashes.json")
    wheel = tmp_path / "big.whl"
    wheel.write_bytes(b"a" * (images.BIG_FILE + 1))
    first = images.file_sha(wheel)
    cached = json.loads(images.HASH_CACHE.read_text())[str(wheel.resolve())]
    assert cached[2] == first
    wheel.write_bytes(b"b" * (images.BIG_FILE + 1))
    assert images.file_sha(wheel) != first


def test_rendered_dockerfiles_match_their_golden_files(tmp_path):
    """The whole Dockerfile of a CUDA stack with a pip-pinned NCCL, and of a CPU stack, both installing
    from the locked wheels: any change to a template shows up here as a diff to review."""
    from .goldens import assert_golden

    pinned = images.render(_stack(nccl="2.21.5", nccl_via="pip"), images.BuildOptions())
    assert_golden("cuda-pip-nccl.Dockerfile", pinned.dockerfile)
    wheel = tmp_path / "torch-2.13.0-cp311-none-any.whl"
    wheel.write_bytes(b"")
    cpu = images.render(matrix.Stack(**CPU), images.BuildOptions(), wheels=[wheel])
    assert_golden("cpu.Dockerfile", cpu.dockerfile)


def test_a_build_error_names_its_cause_the_log_and_the_fix(tmp_path):
    """pip's last line, "No matching distribution found for torch==2.13.0", reads as "no such version";
    the cause is earlier in the log. Lines as pip prints them (urllib3's retry warnings)."""
    log = tmp_path / "cpu.log"
    log.write_text(
        "Step 6/12 : RUN pip install torch==2.13.0 accelerate==1.15.0\n"
        "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection "
        "broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f>: Failed to "
        "establish a new connection: [Errno -2] Name or service not known')': /simple/torch/\n"
        "ERROR: Could not find a version that satisfies the requirement torch==2.13.0 (from versions: none)\n"
        "ERROR: No matching distribution found for torch==2.13.0\n")
    reason = images.failure_reason("The command '/bin/sh -c pip install ...' returned a non-zero code: 1", log)
    assert reason.startswith("the package index's name did not resolve (DNS): WARNING: Retrying")
    assert f"(log: {log})" in reason and f"Fix: fill the wheel store ({wheelhouse.DEFAULT_STORE}, or --wheelhouse DIR)" in reason
    log.write_text("ERROR: Could not find a version that satisfies the requirement torch==9.9 (from versions: 2.4.1, "
                   "2.5.1)\nERROR: No matching distribution found for torch==9.9\n")
    assert images.failure_reason("x", log).startswith("the index has no such version")
    log.write_text("Step 3/9 : RUN false\n")
    assert images.failure_reason("returned a non-zero code: 1", log) == f"returned a non-zero code: 1 (log: {log})"
