"""The broker's features, as a run found or set them: eligible leader replicas (KIP-966) on and off."""

import pytest

from lab.config import make_config
from lab.run.supervisor import run_scenario

pytestmark = pytest.mark.integration


def test_elr_is_finalized_off_and_on_before_the_run_and_the_report_says_which(runs_dir):
    """Eligible leader replicas (KIP-966) are a cluster-wide feature: set on the run's broker before its topic."""
    for elr, level in (("off", 0), ("on", 1)):
        r = run_scenario(make_config(pipeline="plain", events=300, rate=0, elr=elr)).report
        assert r["settings"]["elr"] == elr and r["broker_features"].get("eligible.leader.replicas.version", 0) == level
        assert r["broker_features"]["transaction.version"] == 2 and r["exactly_once"] == 300
