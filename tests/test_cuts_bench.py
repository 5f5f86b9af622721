"""The cut bounds on the trace replay (benchmarks.cuts) on the first two days of the trace: the
JSON's shape, and the tapered fabric's cuts binding where the trace's own fabric has none."""
import json

import pytest

from benchmarks import cuts as bench
from controller.model import hosttable
from simulation import trace_replay as tr


@pytest.mark.slow
def test_two_days_of_the_trace(tmp_path):
    out = tmp_path / "cuts.json"
    assert bench.main(["--days", "2", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["command"] == bench.COMMAND and doc["trace"]["cut"]["days"] == 2
    assert len(doc["scenarios"]) == len(bench.SCENARIOS)
    for sc in doc["scenarios"].values():
        assert set(sc["algorithms"]) == {"auto", "ecmp"}
        for o in sc["algorithms"].values():
            assert 0 <= o["cut_bound_jobs"] <= o["fabric_jobs"] <= o["multi_host_jobs"]
            assert o["slowed_and_cut_bound"] <= o["slowed_job_replans"] <= o["job_replans"]
            for gap in (o["planned_over_bound"], o["planned_over_unsplit_bound"]):
                assert gap is None or gap["mean"] >= 1 - 1e-6  # no plan beats a bound
    tapered = doc["scenarios"]["random, aggs_per_pod 2"]["algorithms"]["auto"]
    assert tapered["cut_bound_jobs"] > 0 and tapered["examples"]
    assert doc["scenarios"]["locality"]["algorithms"]["auto"]["cut_bound_jobs"] == 0


def test_the_replay_shows_every_replan_to_its_observer():
    fabric = hosttable.load(tr.TOPO)
    seen = []
    run = tr.replay(tr.read_trace(tr.TRACE, jobs=60), fabric, "greedy",
                    observe=lambda jobs, times, now: seen.append((len(jobs), set(times), now)))
    assert len(seen) == run["stats"]["replans"] > 0
    assert all(n == len(ids) and n > 0 for n, ids, _ in seen)
    assert [now for _, _, now in seen] == sorted(now for _, _, now in seen)
