"""Adding a pipeline is its spec and its driver: a toy one runs, crashes and is audited with no other module edited."""

from __future__ import annotations

import os

import pytest

from lab.config import make_config
from lab.errors import LabError
from lab.registry import PIPELINES
from lab.run.supervisor import run_scenario
from tests.conftest import ROOT
from tests.integration.toy_pipeline import SPEC


@pytest.fixture
def toy(monkeypatch, tmp_path):
    """The toy's spec in this process's registry, and in every process a run starts (its driver): a
    ``sitecustomize`` on their ``PYTHONPATH`` adds it as they start."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("from lab.registry import PIPELINES\n"
                                           "from tests.integration.toy_pipeline import SPEC\n"
                                           "PIPELINES.setdefault(SPEC.name, SPEC)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setitem(PIPELINES, SPEC.name, SPEC)
    return SPEC


def test_the_registry_alone_makes_its_settings_faults_and_sinks(toy, runs_dir):
    cfg = make_config(pipeline="toy", sink="idempotent", events=300)
    assert cfg.settings["sink"] == "idempotent" and cfg.spec is toy and "driver-crash" in toy.faults
    with pytest.raises(LabError, match="'toy'"):
        make_config(pipeline="toy", storm_mode="trident")  # a Storm setting: the engines' checks loop over the registry
    with pytest.raises(LabError, match="valid for it: driver-crash"):
        make_config(pipeline="toy", faults="executor-crash@at=1s")
    with pytest.raises(LabError, match="valid pipelines for it"):
        make_config(pipeline="toy", sink="topic")


def test_a_toy_pipeline_runs_crashes_and_is_audited(toy, runs_dir):
    cfg = make_config(pipeline="toy", sink="idempotent", events=1500, rate=1000, max_batch_records=100,
                      faults="driver-crash@batch=3:mid-output")
    result = run_scenario(cfg)
    a = result.audit
    assert result.restarts == 1 and a.acked == 1500
    assert (a.exactly_once, a.lost, a.duplicated) == (1500, 0, 0)  # read again from the start, stored once
    assert a.write_attempts > a.stored_rows  # the replay wrote again what the crash had left
