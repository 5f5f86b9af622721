"""Real collective libraries on three tiers: PyTorch gloo and Open MPI, one rank per host of an
emulated k = 4 fat-tree (20 Open vSwitch switches, 16 hosts, 20 Mbit/s), ring neighbours in
different pods (``collectives.rank_hosts``), so that every ring flow crosses the cores.

A correctly declared ring balances the uplinks of every leaf and every aggregation switch and
runs near the line rate; a job declared by its members only is learned from sFlow (five
bridges sample a packet between pods) and then runs within 10% of the correct declaration.
Every run checks the reduced sums exactly.
"""
import json
import os
import statistics
import time

import pytest

from emulation.harness import collectives as co
from emulation.harness.session import Session
from tests.integration import EXTENDED, gloo_only_in_make_test, require_root_and_ovs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

BW = 10  # Mbit/s: 16 ranks and 20 userspace switches on 2 cores keep up with it
MIB, ITERS = 2, 3
BALANCED = 0.10  # worst switch's (max - mean) / mean over its uplinks
NEAR_LINE_RATE = {"gloo": 1.35, "mpi": 2.2}  # as on two tiers (tests/test_collectives.py)
SAME_SPEED = 1.10
LOGS = os.path.join(co.LOG_ROOT, "tests-fattree-" + time.strftime("%Y%m%d-%H%M%S"))


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    require_root_and_ovs()
    if all(co.missing(lib) for lib in co.LIBRARIES):
        pytest.skip(co.missing("gloo"))
    with Session.fat_tree(4, 2, BW, str(tmp_path_factory.mktemp("fattree-coll"))) as s:
        s.hosts = co.rank_hosts(s.fabric)
        s.runs = {}
        yield s


def measure(emu, library, scenario, again=""):
    why = co.missing(library)
    if why:
        pytest.skip(why)
    logdir = os.path.join(LOGS, f"{library}-{scenario}{again}")
    res = co.SCENARIOS[scenario](emu, library, emu.hosts, MIB, ITERS, logdir)
    with open(os.path.join(logdir, "result.json"), "w") as fh:  # what a failure looks at
        json.dump(res, fh, indent=1, default=str)
    assert res["sums_ok"], f"wrong sums (max error {res['max_error']}); logs {res['logs']}"
    assert len(res["times"]) == ITERS and all(t > 0 for t in res["times"])
    return res


def run(emu, library, scenario):
    key = (library, scenario)
    if key not in emu.runs:
        emu.runs[key] = measure(emu, library, scenario)
    return emu.runs[key]


def crosses_pods(emu, route) -> bool:
    return len(route["path"]) == 5 and route["path"][2] in emu.fabric.tier_of


@pytest.mark.parametrize("library", gloo_only_in_make_test(co.LIBRARIES))
def test_a_declared_ring_across_pods_is_balanced_at_every_tier(emu, library):
    res = run(emu, library, "correct")
    routes = res["job"]["view"]["routes"]
    assert len(routes) == 16 and all(crosses_pods(emu, r) for r in routes)
    assert res["imbalance"] < BALANCED, res["uplinks"]
    core = {k: v for k, v in res["uplinks"].items() if k.startswith("a")}
    assert len(core) == 16 and min(core.values()) > 0, core  # every core uplink carried data
    ideal = co.ideal_s(len(emu.hosts), MIB, BW)
    assert statistics.median(res["times"]) < NEAR_LINE_RATE[library] * ideal, res["times"]


@EXTENDED  # make test: members only on two tiers (test_collectives.py, test_learning_live.py)
@pytest.mark.parametrize("library", co.LIBRARIES)
def test_members_only_is_learned_and_as_fast_as_declared(emu, library):
    if not co.learning_supported(emu.ctl):
        pytest.skip("the controller does not take members-only jobs")
    res = run(emu, library, "members")
    view = res["job"]["view"]
    assert view["matrix"] == "learned", view
    assert res["imbalance"] < BALANCED, res["uplinks"]
    ranks = {h: r for r, h in enumerate(emu.hosts)}
    n, d = len(emu.hosts), co.DATA_DIRECTION[library]
    ring = {(h, emu.hosts[(r + d) % n]) for h, r in ranks.items()}
    assert ring <= {(r["src"], r["dst"]) for r in view["routes"]}
    times, reference = res["times"], run(emu, library, "correct")["times"]
    if statistics.median(times) > SAME_SPEED * statistics.median(reference):
        # 16 ranks, 20 switches and the controller share 2 cores: measure both once more,
        # back to back, and judge 6 + 6 iterations (a collision costs 30-100%)
        times = times + measure(emu, library, "members", "-again")["times"]
        reference = reference + measure(emu, library, "correct", "-again")["times"]
    assert statistics.median(times) <= SAME_SPEED * statistics.median(reference), (
        times, reference)
