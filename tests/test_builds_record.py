"""results/<run>/builds.json, the same record from `invoke build` and `invoke matrix`: every image's
status (built, cached, build-error) with its time, log and reason, and the cells a failed image turns
into build-error; a resumed run adds to it."""

from __future__ import annotations

import json

from harness import matrix
from harness.images import BuildResult
from harness.pipeline import write_builds


def test_builds_json_says_what_was_built_reused_or_failed(tmp_path):
    m = matrix.load(matrix.DEFAULT_CPU_MATRIX)
    cells = list(m.runnable)
    first, second = list({c.stack.id: c.stack for c in cells})[:2]
    built = {first: BuildResult(first, "nccl-harness/a:1", "built", seconds=61.5, log="/r/builds/a.log",
                                started_wall=1.7e9),
             second: BuildResult(second, "", "build-error", "pip: no such version (log: /r/builds/b.log)", 3.0,
                                 "/r/builds/b.log")}
    path = tmp_path / "builds.json"
    write_builds(path, m, cells, built)
    record = json.loads(path.read_text())
    assert record["matrix"] == str(m.path)
    assert record["images"][first] == {"stack_id": first, "tag": "nccl-harness/a:1", "status": "built", "reason": "",
                                            "seconds": 61.5, "log": "/r/builds/a.log", "image_id": "",
                                            "started_wall": 1.7e9}  # with seconds: when the image was ready
    assert record["images"][second]["status"] == "build-error"
    failed = {c.id for c in cells if c.stack.id == second}
    assert set(record["cells"]) == failed and {o["status"] for o in record["cells"].values()} == {"build-error"}

    # --resume: the second attempt builds the failed image; what the first one recorded stays
    write_builds(path, m, cells, {second: BuildResult(second, "nccl-harness/b:2", "built", seconds=40.0)}, add=True)
    record = json.loads(path.read_text())
    assert {k: v["status"] for k, v in record["images"].items()} == {first: "built", second: "built"}
    assert record["cells"] == {}
