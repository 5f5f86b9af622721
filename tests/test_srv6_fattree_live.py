"""Real collectives on three tiers of routers (issue 75): the k = 4 fat-tree of Linux routers
at 20 Mbit/s, the controller in srv6 mode, an ``mlroute-agent`` per host
(``emulation/harness/router_jobs.py``; the figures with ECMP: ``python -m benchmarks.srv6
--only fattree``). Extended tier: about five minutes."""
from __future__ import annotations

import pytest

from tests.integration import EXTENDED, require_root_and_ovs

pytestmark = [pytest.mark.integration, EXTENDED]


def test_rings_and_an_all_to_all_run_on_their_plans_declared_and_learned(tmp_path):
    """A gloo ring and an Open MPI ring of 8 ranks, one per leaf across the pods, and a gloo
    all-to-all of 8, each alone: declared, every ring's median step within 10% of the
    controller's prediction for its plan; posted by its members only, learned from the agents'
    traffic reports (every pair the library sends planned) and then as fast as declared."""
    require_root_and_ovs()
    from emulation.harness import collectives, router_jobs
    for lib in ("gloo", "mpi"):
        if why := collectives.missing(lib):
            pytest.skip(why)
    doc = router_jobs.run(str(tmp_path), steps=3, ecmp=False)
    jobs = doc["jobs"]
    assert list(jobs) == ["gloo-ring", "mpi-ring", "all-to-all"]
    for jid, j in jobs.items():
        assert j["predicted_s"] == pytest.approx(j["ideal_s"], rel=0.01), (jid, j)
        assert j["learned_pairs_planned"], (jid, j)
        if jid.endswith("ring"):
            assert abs(j["plan_over_prediction"] - 1) <= 0.10, (jid, j)
            assert abs(j["learned_over_prediction"] - 1) <= 0.10, (jid, j)
            assert j["direction"] == collectives.DATA_DIRECTION[j["library"]], (jid, j)
    # the all-to-all: seven windows into each port at 20 Mbit/s (see the results page);
    # its plan keeps it within twice its prediction
    assert jobs["all-to-all"]["plan_over_prediction"] < 2.0, jobs["all-to-all"]
