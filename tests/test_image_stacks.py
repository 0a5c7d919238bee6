"""The user's own image as a stack (`image:` in matrix.yaml): how the file declares it, what the probe's
output says about the image, the thin layer built over it, its identity in the record, and how the
report, the Rerun line and compare show it. Pure and fast; tests/test_image_stacks_engine.py runs them."""

from __future__ import annotations

import json

import pytest

from harness import compare, imagefacts, images, launch, matrix, selection
from harness.cellfields import CellFields
from harness.errors import HarnessError, MatrixError
from harness.record import CellRecord
from harness.report import rerun_command
from harness.runfacts import RunFacts

IMAGE_ID = "sha256:" + "ab" * 32
OTHER_ID = "sha256:" + "cd" * 32


def _load(write_matrix, stacks: str) -> matrix.Matrix:
    return matrix.load(write_matrix(f"version: 1\nstacks:\n  include:\n{stacks}variants: [default]\n"))


def _facts(**kw) -> imagefacts.ImageFacts:
    base = dict(image_id=IMAGE_ID, python_path="/opt/site/bin/python3", python="3.11.2", torch="2.13.0+cpu",
                cuda="", nccl="", accelerate="1.15.0", distro="Debian GNU/Linux 12 (bookworm)")
    return imagefacts.ImageFacts(**(base | kw))


def _read(stack: matrix.Stack, **kw) -> matrix.Stack:
    """The stack as userimages.read fills it in from the facts."""
    from dataclasses import replace

    found = _facts(**kw)
    return replace(stack, cuda=found.cuda or "cpu", torch=found.torch, nccl=found.nccl or "bundled",
                   accelerate=stack.accelerate or found.accelerate, python=found.python_mm, facts=found)


# ------------------------------------------------------------------------------------------ matrix.yaml


def test_an_image_stack_is_named_by_its_name_or_its_reference(write_matrix):
    m = _load(write_matrix, "    - {image: \"nvcr.io/nvidia/pytorch:24.10-py3\"}\n"
                            "    - {image: \"site/train:2026-11\", name: last-month, python: /opt/conda/bin/python}\n")
    ngc, site = m.stacks
    assert (ngc.id, ngc.image, ngc.is_image, ngc.template) == ("pytorch-24.10-py3", "nvcr.io/nvidia/pytorch:24.10-py3", True,
                                                                "image")
    assert (site.id, site.python_path, site.accelerate) == ("last-month", "/opt/conda/bin/python", "")
    assert [c.id for c in m.cells] == ["pytorch-24.10-py3+default", "last-month+default"]
    assert matrix.default_name(IMAGE_ID) == "image-abababababab"


@pytest.mark.parametrize("entry, words", [
    ('{image: "site/train:1", torch: "2.5.1"}', ["`torch` cannot be given with `image:`", "read from inside the image",
                                                   "remove `torch`"]),
    ('{image: "site/train:1", cuda: "12.4.1"}', ["`cuda` cannot be given with `image:`"]),
    ('{image: "site train"}', ["is not an image reference"]),
    ('{image: "site/train:1", name: "Last+Month"}', ["`name: Last+Month` is not usable as a stack id", "no '+'"]),
    ('{image: "site/train:1", python: "python; rm -rf /"}', ["is not a Python to run", "/opt/conda/bin/python"]),
    ('{image: "site/train:1", accelerate: "latest"}', ["`accelerate: latest` is not a version"]),
])
def test_a_malformed_image_stack_names_the_key_and_the_fix(write_matrix, entry, words):
    with pytest.raises(MatrixError) as err:
        _load(write_matrix, f"    - {entry}\n")
    text = str(err.value)
    assert "stacks.include[0]" in text and "Fix:" in text
    for word in words:
        assert word in text, text


def test_a_built_stack_records_no_image_keys_and_an_image_stack_its_identity_once_read(write_matrix):
    built = matrix.Stack("cpu", "2.13.0", "1.15.0", base="harness-base:bookworm", python="3.11", template="cpu")
    assert not set(built.fields()) & {"image", "name", "image_id"}
    stack = _load(write_matrix, '    - {image: "site/train:2026-11", name: site}\n').stacks[0]
    assert stack.fields()["image"] == "site/train:2026-11" and "image_id" not in stack.fields()
    found = _read(stack).fields()
    assert (found["image_id"], found["python_path"], found["torch"], found["cuda"], found["stack"]) == \
        (IMAGE_ID, "/opt/site/bin/python3", "2.13.0+cpu", "cpu", "site")
    assert CellFields.read(found).to_json() == found  # the record keeps exactly these


# ------------------------------------------------------------------------------------- the probe's output


def test_the_probe_reads_its_line_after_an_entrypoints_banner():
    line = imagefacts.MARK + json.dumps({"python_path": "/usr/bin/python", "python": "3.10.12", "torch": "2.5.0a0+e000",
                                         "cuda": "12.6", "nccl": "2.22.3", "accelerate": None, "distro": "Ubuntu 22.04"})
    banner = "=============\n== PyTorch ==\n=============\nNVIDIA Release 24.10\n"
    found = imagefacts.parse(0, banner + line + "\n", IMAGE_ID, "nvcr.io/nvidia/pytorch@sha256:" + "ef" * 32)
    assert (found.torch, found.cuda, found.nccl, found.accelerate, found.python_mm) == ("2.5.0a0+e000", "12.6", "2.22.3", "",
                                                                                        "3.10")
    # what the record keeps pins the image: the registry's digest finds it again; an image from no registry, its id
    pinned = CellFields(image="nvcr.io/nvidia/pytorch:24.10-py3", image_id=found.image_id, image_digest=found.digest)
    assert pinned.pin is not None and pinned.pin.startswith("nvcr.io/nvidia/pytorch@sha256:")
    assert CellFields(image="site/train:1", image_id=IMAGE_ID, image_digest=_facts().digest).pin == IMAGE_ID


@pytest.mark.parametrize("code, output, python, words", [
    (127, "no python\n", "", ["no Python", "python3 and python", "`python: /path/to/python`"]),
    (127, "no python\n", "/opt/conda/bin/python", ["no Python at `/opt/conda/bin/python`", "correct `python:`"]),
    (0, imagefacts.MARK + json.dumps({"python_path": "/usr/bin/python3", "torch": None,
                                      "torch_error": "ModuleNotFoundError: No module named 'torch'"}) + "\n", "",
     ["no torch for /usr/bin/python3", "No module named 'torch'", "image with torch"]),
    (139, "Segmentation fault\n", "", ["could not be asked", "exit 139", "Segmentation fault", "ENTRYPOINT is kept"]),
])
def test_an_image_without_python_or_torch_is_named_with_its_fix(code, output, python, words):
    with pytest.raises(imagefacts.ProbeProblem) as err:
        imagefacts.parse(code, output, IMAGE_ID, python=python)
    text = f"{err.value.what}. Fix: {err.value.fix}"
    for word in words:
        assert word in text, text


def test_the_probe_tries_only_the_python_the_stack_names():
    assert "python3 python" in imagefacts.probe_command()[2]
    named = imagefacts.probe_command("/opt/conda/bin/python")[2]
    assert "/opt/conda/bin/python" in named and "python3 python" not in named


# ------------------------------------------------------------------------------------------ the thin layer


def test_the_thin_layer_adds_only_the_workload_from_the_images_content_id(write_matrix):
    stack = _read(_load(write_matrix, '    - {image: "site/train:2026-11", name: site}\n').stacks[0])
    context = images.render(stack, images.BuildOptions())
    text = context.dockerfile
    assert f"FROM {IMAGE_ID}\n" in text and "pip install" not in text and "torch==" not in text
    assert "COPY workload/ /opt/harness/workload/" in text
    assert f"exec %s \"$@\"\\n' /opt/site/bin/python3 > {imagefacts.IMAGE_PYTHON}" in text
    assert not [name for name, _ in context.files if name.startswith("wheels/")]
    assert context.tag.startswith("nccl-harness/site:")


def test_an_accelerate_the_image_lacks_is_installed_with_the_images_python(write_matrix):
    stack = _read(_load(write_matrix, '    - {image: "site/train:1", name: site, accelerate: "0.34.2"}\n').stacks[0])
    assert images.requirements(stack) == ["accelerate==0.34.2"]
    assert "/opt/site/bin/python3 -m pip install --no-index --find-links /tmp/wheels accelerate==0.34.2" in \
        images.render(stack, images.BuildOptions()).dockerfile
    same = _read(_load(write_matrix, '    - {image: "site/train:1", name: site, accelerate: "1.15.0"}\n').stacks[0])
    assert images.requirements(same) == []  # the image's own is the one pinned


def test_a_re_pushed_tag_is_a_new_thin_layer_and_a_pinned_rerun_finds_the_same_one(write_matrix):
    stack = _load(write_matrix, '    - {image: "site/train:latest", name: site}\n').stacks[0]
    first = images.render(_read(stack), images.BuildOptions()).tag
    repushed = images.render(_read(stack, image_id=OTHER_ID), images.BuildOptions()).tag
    (cell,) = selection.override([matrix.Cell(stack, matrix.Variant("default"))], [("site", IMAGE_ID)])
    pinned = images.render(_read(cell.stack), images.BuildOptions()).tag
    assert first != repushed and pinned == first
    assert cell.stack.image == IMAGE_ID and cell.id == "site+default"


def test_image_flag_names_an_image_stack_or_is_refused():
    built = matrix.Cell(matrix.Stack("cpu", "2.13.0", "1.15.0"), matrix.Variant("default"))
    with pytest.raises(HarnessError, match=r"--image site=x:1: `site` is not an image stack .*none in this selection.*Fix"):
        selection.override([built], [("site", "x:1")])
    with pytest.raises(HarnessError, match=r"--image site: expected NAME=REF.*Fix: e.g. --image site="):
        selection.parse_image("site")


def test_an_image_stacks_launcher_runs_the_images_own_python_through_the_wrapper(write_matrix):
    m = _load(write_matrix, '    - {image: "site/train:1", name: site}\n')
    cell = matrix.Cell(_read(m.stacks[0]), m.cells[0].variant)
    argv = launch.launch(cell, m, ranks=2, python=launch.container_python(cell)).argv
    assert argv[:3] == (imagefacts.IMAGE_PYTHON, "-m", "accelerate.commands.launch")
    built = matrix.Cell(matrix.Stack("cpu", "2.13.0", "1.15.0"), m.cells[0].variant)
    assert launch.container_python(built) == "python"


# --------------------------------------------------------------------------- the report, Rerun, compare


def _record(stack: matrix.Stack, status: str = "pass", accelerate: str | None = None) -> CellRecord:
    cell = matrix.Cell(stack, matrix.Variant("default"))
    fields = cell.fields() | ({"accelerate": accelerate} if accelerate else {})
    return CellRecord.from_json({"id": cell.id, "cell": fields, "env": {},
                                 "outcome": {"status": status, "reason": "ok", "seconds": 9.0}, "attempts": []})


def test_the_rerun_line_pins_the_image_that_ran(write_matrix):
    stack = _read(_load(write_matrix, '    - {image: "site/train:2026-11", name: site}\n').stacks[0])
    line = rerun_command(_record(stack), RunFacts(matrix_path="site.yaml"))
    assert line == f"invoke matrix --matrix site.yaml --image site={IMAGE_ID} --only 'site+default'"
    assert CellFields.read(stack.fields()).image_label == "site (site/train:2026-11, abababababab)"


def test_compare_puts_two_stacks_side_by_side_and_names_what_differs_inside(write_matrix, tmp_path):
    from harness.results import RunData

    m = _load(write_matrix, '    - {image: "site/train:2026-11", name: nov}\n    - {image: "site/train:2026-12", name: dec}\n')
    nov, dec = _read(m.stacks[0]), _read(m.stacks[1], image_id=OTHER_ID, accelerate="0.34.2")
    run = RunData(tmp_path / "run1", {}, {r.id: r for r in (_record(nov), _record(dec, "fail"))}, {})
    a, b = compare.of_stack(run, "nov"), compare.of_stack(run, "dec")
    assert list(a.records) == list(b.records) == ["default"]
    d = compare.diff(a, b)
    assert d.regressions == ["`default`: pass → fail (ok)\n  - find the release that broke it: `invoke bisect 'nov+default' "
                             "--axis image --good site/train:2026-11 --bad site/train:2026-12 --versions "
                             "site/train:2026-11,site/train:2026-12` (list the images made between them in --versions, "
                             "in order)"]
    assert d.images == ["site/train:2026-11 (abababababab) → site/train:2026-12 (cdcdcdcdcdcd): Accelerate 1.15.0 → 0.34.2"]
    text = compare.render(a, b, d, 0.1, ("nov", "dec"))
    assert text.startswith("# Compare `run1` stack `nov` → `run1` stack `dec`")
    with pytest.raises(HarnessError, match=r"--stacks: run `run1` has no cell of stack `jan` \(its stacks: dec, nov\)"):
        compare.of_stack(run, "jan")
    with pytest.raises(HarnessError, match=r"--stacks nov: expected OLD=NEW"):
        compare.parse_stacks("nov")
