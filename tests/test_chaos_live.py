"""The chaos suite on real parts (issue 59, ``benchmarks/chaos.py``): each fault of an
operator's bad day leaves nothing lost. Every switch's tables equal the controller's intent
(dumped, wiped, refilled by the controller, equal), no REST answer is a 5xx, the gloo ring
running through it sums exactly, and jobs are present and complete or absent, never half.

``make test`` runs one case: ``ovs-ctl restart`` on the leaf-spine with two jobs installed
(the tables after equal those before, no route moved). ``make test-live`` runs the whole
suite on both shapes. The pure parts (the judgement, routes compared): test_chaos.py."""
import pytest

from benchmarks import chaos
from tests.integration import EXTENDED, ext, require_root_and_ovs

pytestmark = [pytest.mark.integration]


def run(tmp_path, shape: str, cases: list[str]) -> list[dict]:
    require_root_and_ovs()
    results = chaos.run_shape(shape, cases, str(tmp_path))
    assert len(results) >= len(cases), results
    return results


@pytest.mark.timeout(300)
def test_an_ovs_restart_brings_back_the_same_tables_and_moves_nothing(tmp_path):
    (res,) = run(tmp_path, "leaf-spine", ["ovs-restart"])
    assert res["ok"], res
    assert res["routes_moved"] == 0 and res["same_tables_s"] is not None, res
    assert res["tables"]["mismatched"] == 0 and res["rest"]["5xx"] == 0, res


@EXTENDED
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("shape", ["leaf-spine", "fat-tree"])
def test_every_chaos_case_loses_nothing(tmp_path, shape):
    cases = [c for c in chaos.ALL if c != "etcd"]
    results = run(tmp_path, shape, cases)
    assert [r for r in results if not r["ok"]] == [], results
    kills = [r for r in results if r["case"] == "kill"]
    assert len(kills) == 3 and all(r["job"] in ("absent", "present-complete") for r in kills)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("shape", [ext("leaf-spine"), ext("fat-tree")])
def test_an_etcd_killed_under_two_controllers_loses_nothing(tmp_path, shape):
    (res,) = run(tmp_path, shape, ["etcd"])
    assert res["ok"], res
    assert res["job_x"] == res["job_y"] == "present-complete", res
