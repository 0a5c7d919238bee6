"""The codec's promise: what the harness writes, it reads back. Values are generated from the record
types' own declarations (tests/strategies.py), written with to_json, put through real JSON text, and
read strictly; the value and its JSON come back the same. And what does not fit a declaration is
refused where it is (strict), or left out with the rest kept (tolerant)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from harness.codec import RecordError
from harness.evidence import BandwidthRow, Fingerprint, NcclSummary, RankState, RawAttempt, Stall
from harness.record import CellRecord, Outcome
from harness.runfacts import RunJson

from .strategies import values

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("model", [Stall, BandwidthRow, NcclSummary, RankState, Fingerprint, Outcome, RunJson,
                                   RawAttempt, CellRecord], ids=lambda m: m.__name__)
def test_every_value_the_harness_can_write_reads_back_the_same(model):
    @SETTINGS
    @given(values(model))
    def round_trip(value):
        text = json.dumps(value.to_json(), allow_nan=False)  # as results.write_json writes it
        back = model.read(json.loads(text), "x")
        assert back.to_json() == value.to_json()
        assert back == value or back.model_dump() == value.model_dump()

    round_trip()


def test_a_record_read_back_is_written_again_byte_for_byte():
    @SETTINGS
    @given(values(CellRecord))
    def twice(value):
        once = json.dumps(value.to_json(), indent=2)
        assert json.dumps(CellRecord.read(json.loads(once)).to_json(), indent=2) == once

    twice()


def test_a_part_out_of_its_declaration_is_refused_strictly_and_left_out_tolerantly():
    row = {"bytes": 1 << 30, "time_s": 0.003, "algbw_gbs": 1.2e6, "busbw_gbs": 0.0}  # one rank's "algbw"
    with pytest.raises(RecordError, match=r"rows\[0\]\.algbw_gbs should be a number from 0 to 1e\+06"):
        RawAttempt.read({"phases": {"bandwidth": {"rows": [row]}}}, "raw")
    problems: list[str] = []
    raw = RawAttempt.tolerant({"phases": {"bandwidth": {"rows": [row]}}}, problems)
    assert raw.bandwidth_rows[0].bytes == 1 << 30 and raw.bandwidth_rows[0].time_s == 0.003
    assert "algbw_gbs" not in raw.to_json()["phases"]["bandwidth"]["rows"][0]  # left out, the rest kept
    assert problems == ["phases.bandwidth.rows[0].algbw_gbs should be a number from 0 to 1e+06, not number 1200000.0"]
    assert RawAttempt.read(raw.to_json()) == raw  # and what was kept reads back


def test_a_fact_the_rank_could_not_collect_is_kept_as_its_error_not_in_place_of_the_fact():
    fp = Fingerprint.read({"torch": "2.11.0", "accelerate": {"error": "ModuleNotFoundError: No module named 'accelerate'"}})
    assert fp.accelerate is None and fp.torch == "2.11.0"
    assert fp.fact_errors == {"accelerate": "ModuleNotFoundError: No module named 'accelerate'"}
    assert Fingerprint.read(fp.to_json()) == fp


def test_run_json_as_the_pipeline_writes_it_reads_back_and_a_fact_that_does_not_fit_is_left_out():
    from harness import hostinfo
    from harness.engines.host import HostEngine
    from harness.runfacts import HostJson, RunFacts

    host = hostinfo.facts(HostEngine().facts())
    unfit: list[str] = []
    written = RunJson(run_id="r", host=HostJson.tolerant(host, unfit), engine="host", gpus=("0",)).to_json()
    assert unfit == [] and written["host"] == host  # every fact hostinfo gathers is declared, kept as it was
    facts = RunFacts.from_json(json.loads(json.dumps(written)))
    assert (facts.hostname, facts.engine, facts.engine_flags, facts.gpus) == (host["hostname"], "host",
                                                                             ("--engine", "host"), ("0",))
    odd = HostJson.tolerant(host | {"gpus": ["H200", 7], "driver": 580}, unfit, "host")
    assert odd.gpus == ("H200",) and odd.driver is None and len(unfit) == 2  # left out and said, the rest kept
