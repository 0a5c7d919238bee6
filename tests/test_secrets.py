"""Secrets and markup (issue 14, item 7), on a real run: credential-looking variables in the host's
environment and in a user's variant, a URL with credentials, and HTML in a variant value and in a
failure's reason. After the run, its report and publish, no secret value is in any file under the
results or the published tree, and no HTML tag from the input is in any markdown file there."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from harness import commands, results
from harness.errors import guarded
from harness.workload import redact

SECRETS = {  # in the host's environment: inherited by the ranks, recorded as inherited
    "NCCL_COLLNET_PASSWD": "s3cret-collnet-9471",
    "TORCH_HUB_CREDENTIALS": "s3cret-hub-5520",
    "TORCH_AUTH_HEADER": "Bearer s3cret-auth-0042",
    "NCCL_IB_PKEY": "s3cret-pkey-7788",
    "NCCL_NET_PLUGIN_URL": "https://alice:s3cret-url-3141@plugins.example/x",
}
VARIANT_SECRET = "hf_s3cretvariant0815"
HTML = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(2)</script>"
MATRIX = f"""version: 1
stacks:
  matrix: {{cuda: ["cpu"], torch: ["2.13.0"], accelerate: ["1.15.0"]}}
variants: [leaky, broken]
launchers: [accelerate]
define:
  variants:
    leaky: {{env: {{HF_TOKEN: "{VARIANT_SECRET}", NCCL_ALGO: "{HTML}"}}}}
    broken: {{env: {{GLOO_SOCKET_IFNAME: "{SCRIPT}"}}}}
timeouts: {{fingerprint: 60, init: 30, prepare: 60, step: 30, check: 30, bandwidth: 60, teardown: 30, cell: 300}}
bandwidth: {{sizes: ["4K"], iters: 2, warmup: 1, trials: 2}}
ranks: 2
"""


def test_the_rule_keeps_only_safe_values():
    assert redact.shown("NCCL_P2P_DISABLE", "1") == "1" and redact.shown("MASTER_PORT", "29500") == "29500"
    assert redact.shown("OMP_NUM_THREADS", "4") == "4" and redact.shown("TORCH_NCCL_BLOCKING_WAIT", "1") == "1"
    for name in ("HF_TOKEN", "NCCL_COLLNET_PASSWD", "TORCH_HUB_CREDENTIALS", "TORCH_AUTH_HEADER", "AWS_SESSION_X",
                 "TORCH_HOME", "GLOO_SOCKET_IFNAME", "NCCL_IB_PKEY", "ACCELERATE_COOKIE"):
        assert redact.shown(name, "v") == redact.MASK, name
    assert redact.shown("NCCL_DEBUG_FILE", "http://u:pw@host:80/a and ftp://x@y") == "http://***@host:80/a and ftp://***@y"
    assert redact.shown("HF_TOKEN", None) is None


@pytest.fixture(scope="module")
def leaky_run(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("secrets")
    matrix_file = root / "leaky.yaml"
    matrix_file.write_text(MATRIX)
    saved = dict(os.environ)
    os.environ.update(SECRETS)
    try:
        code = guarded(lambda: commands.run_matrix(commands.Selection(matrix_file),
                                                   commands.MatrixOptions(engine="host", results=root / "results",
                                                                          run_id="leaky")))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert code == 1  # `broken` fails: gloo finds no interface of that name
    assert guarded(lambda: commands.report("leaky", root / "results", out=root / "results" / "again.md")) == 0
    assert guarded(lambda: commands.publish("leaky", root / "docs", root / "results")) == 0
    for cell_id in results.load_run(root / "results" / "leaky").records:  # issue 24's bug report of each cell
        out = root / "results" / f"bugreport-{cell_id.rsplit('+', 1)[-1]}.md"
        assert guarded(lambda c=cell_id, o=out: commands.bugreport(c, "leaky", root / "results", "nccl", o)) == 0
    return root


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and p.suffix != ".png"]


def test_the_run_recorded_both_cells(leaky_run):
    data = results.load_run(leaky_run / "results" / "leaky")
    assert data.problems == {}
    statuses = {r.cell.variant: r.status for r in data.records.values()}
    assert statuses == {"leaky": "pass", "broken": "fail"}
    leaky = next(r for r in data.records.values() if r.cell.variant == "leaky")
    assert leaky.env == {"HF_TOKEN": redact.MASK, "NCCL_ALGO": HTML}  # kept as data, escaped where shown
    origins = leaky.env_origins()
    assert origins["NCCL_COLLNET_PASSWD"] == (redact.MASK, "inherited")
    assert origins["NCCL_NET_PLUGIN_URL"] == ("https://***@plugins.example/x", "inherited")


def test_no_secret_value_is_in_any_file(leaky_run):
    files = _files(leaky_run / "results") + _files(leaky_run / "docs")
    assert len(files) > 10
    secrets = [VARIANT_SECRET, *(v.split()[-1] for v in SECRETS.values()), "s3cret-url-3141"]
    for path in files:
        text = path.read_bytes().decode("utf-8", "replace")
        leaked = [s for s in secrets if s in text]
        assert not leaked, f"{path} holds {leaked}"


def test_no_html_from_the_input_reaches_markdown(leaky_run):
    pages = [p for p in _files(leaky_run / "results") + _files(leaky_run / "docs") if p.suffix == ".md"]
    assert {p.name for p in pages} >= {"report.md", "again.md", "leaky.md", "index.md", "bugreport-broken.md"}
    for page in pages:
        # inside a fenced block (a bug report's log lines, verbatim) markup is shown, not rendered (CommonMark)
        text = re.sub(r"(?ms)^(`{3,})\n.*?^\1$", "", page.read_text())
        assert "<img" not in text and "<script" not in text and "</script" not in text, page
    report = (leaky_run / "results" / "leaky" / "report.md").read_text()
    assert "NCCL_ALGO=&lt;img src=x onerror=alert(1)&gt;" in report  # readable, inert
    assert "&lt;script&gt;" in report  # the failure's reason names the interface, escaped


def test_result_files_are_readable_like_any_other(leaky_run):
    umask = os.umask(0)
    os.umask(umask)
    run = leaky_run / "results" / "leaky"
    for path in [run / "run.json", *run.glob("cells/*/record.json"), *run.glob("cells/*/attempt-*/attempt.json")]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path
