"""Real collective libraries across leaves, against the real controller: PyTorch gloo (Debian's
python3-torch) and Open MPI (openmpi-bin + python3-mpi4py, ring allreduce forced), one rank per
host of a 2 x 4 x 2 Mininet fabric of Open VSwitch switches, 20 Mbit/s links, declared fabric.

Every run checks the reduced sums exactly. A correctly declared ring must balance every leaf's
uplinks and run near the line rate; a wrong declaration is seen in the traffic; when the
controller learns matrices (issue 14), a wrong or members-only declaration must end within 10%
of the correct one with balanced uplinks (a miss is measured once more, both back to back: one
run's median of 3 is at the mercy of a few seconds of contention on 2 shared cores).
"""
import itertools
import os
import statistics
import time

import pytest

from emulation.harness import collectives as co
from emulation.harness import relaunch
from emulation.harness.session import Session
from tests.integration import (
    EXTENDED,
    HOSTS,
    LEAVES,
    SPINES,
    processes,
    require_root_and_ovs,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

BW = 20  # Mbit/s, as in issue 14
MIB, ITERS = 2, 3  # small: the whole file stays within a few minutes; 3 for a median
BALANCED = 0.10  # worst leaf's (max - mean) / mean over its uplinks; a collision gives ~1.0
# Slowest time of a collision-free ring, x the line-rate ideal. Measured here: gloo 1.1x, Open
# MPI 1.8x (its ring allreduce is not pipelined: 14 lock-step exchanges per All-Reduce). Two
# flows on one uplink give gloo 2.1x and Open MPI 2.6x.
NEAR_LINE_RATE = {"gloo": 1.35, "mpi": 2.2}
SAME_SPEED = 1.10  # a learned matrix's median All-Reduce time over the correct declaration's
LOGS = os.path.join(co.LOG_ROOT, "tests-" + time.strftime("%Y%m%d-%H%M%S"))
_AGAIN = itertools.count(1)  # re-measured runs' log folders


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    require_root_and_ovs()
    if all(co.missing(lib) for lib in co.LIBRARIES):
        pytest.skip(co.missing("gloo"))
    with Session(SPINES, LEAVES, HOSTS, BW, str(tmp_path_factory.mktemp("coll"))) as s:
        s.hosts = co.rank_hosts(s.fabric)
        s.runs = {}
        yield s


def run(emu, library, scenario):
    """One scenario's result, run once per module (later tests compare against it)."""
    why = co.missing(library)
    if why:
        pytest.skip(why)
    key = (library, scenario)
    if key not in emu.runs:
        emu.runs[key] = measure(emu, library, scenario, f"{library}-{scenario}")
    return checked(emu.runs[key])


def remeasure(emu, library, scenario):
    """A fresh run of ``scenario`` (not the module's cached one)."""
    return checked(measure(emu, library, scenario, f"{library}-{scenario}-again{next(_AGAIN)}"))


def measure(emu, library, scenario, folder):
    return co.SCENARIOS[scenario](emu, library, emu.hosts, MIB, ITERS, os.path.join(LOGS, folder))


def checked(res):
    assert res["sums_ok"], f"wrong sums (max error {res['max_error']}); logs {res['logs']}"
    assert len(res["times"]) == ITERS and all(t > 0 for t in res["times"])
    return res


def data_bytes(res, direction):
    """Bytes every rank sent to its neighbour rank + ``direction``."""
    n = len(res["ranks"])
    return [res["pairs"].get(f"{r}->{(r + direction) % n}", 0) for r in range(n)]


def ideal():
    return co.ideal_s(LEAVES * HOSTS, MIB, BW)


@pytest.mark.extended  # every run checks the sums exactly; make test runs the ones below
@pytest.mark.parametrize("library", co.LIBRARIES)
def test_sums_and_data_direction_with_no_job(emu, library):
    res = run(emu, library, "ecmp")
    assert res["direction"] == co.DATA_DIRECTION[library], res["pairs"]
    # each rank sends 2(n-1)/n of the tensor per iteration to that one neighbour
    n = len(emu.hosts)
    expected = 2 * (n - 1) / n * MIB * (1 << 20) * ITERS
    assert min(data_bytes(res, co.DATA_DIRECTION[library])) >= 0.95 * expected
    assert max(data_bytes(res, -co.DATA_DIRECTION[library])) < 0.05 * expected
    # the uplinks carried the ring (ECMP's balance depends on the hash: recorded, not asserted)
    assert sum(res["uplinks"].values()) >= n * 0.95 * expected


@pytest.mark.parametrize("library", co.LIBRARIES)
def test_declared_correctly_balances_uplinks_at_line_rate(emu, library):
    res = run(emu, library, "correct")
    assert res["imbalance"] < BALANCED, res["uplinks"]
    assert statistics.median(res["times"]) < NEAR_LINE_RATE[library] * ideal(), res["times"]
    ecmp = emu.runs.get((library, "ecmp"))
    if ecmp and ecmp["imbalance"] > 0.5:  # ECMP's hash collided this time: slower than declared
        assert max(res["times"]) < 0.85 * min(ecmp["times"]), (res["times"], ecmp["times"])
    routes = res["job"]["view"]["routes"]
    n = len(emu.hosts)
    ranks = {h: r for r, h in enumerate(emu.hosts)}
    d = co.DATA_DIRECTION[library]
    assert len(routes) == n and all(
        ranks[x["dst"]] == (ranks[x["src"]] + d) % n for x in routes)


@EXTENDED
@pytest.mark.parametrize("library", co.LIBRARIES)
def test_declared_in_rank_order(emu, library):
    """Rank order is gloo's pitfall: the declared flows carry only acknowledgements."""
    res = run(emu, library, "rank_order")
    declared_bytes = data_bytes(res, +1)
    if co.DATA_DIRECTION[library] == +1:  # rank order is this library's data direction
        assert res["imbalance"] < BALANCED, res["uplinks"]
        assert statistics.median(res["times"]) < NEAR_LINE_RATE[library] * ideal(), res["times"]
    else:
        data = data_bytes(res, -1)
        assert max(declared_bytes) < 0.02 * min(data), res["pairs"]


def why_unbalanced(res) -> str:
    """A learned run's uplinks with what the controller planned and said (the leaves' tables
    are in the run's log folder)."""
    view = res["job"]["view"]
    return (f"uplinks {res['uplinks']}; routes "
            f"{[(x['src'], x['dst'], x.get('path')) for x in view.get('routes', ())]}; "
            f"learning {view.get('learning')}; events {res['job'].get('events')}; "
            f"logs {res['logs']}")


def learned(emu, library, scenario):
    if not co.learning_supported(emu.ctl):
        pytest.skip("the controller does not take members-only jobs yet (issue 14 item 1)")
    res = run(emu, library, scenario)
    correct = run(emu, library, "correct")
    assert res["job"]["view"]["matrix"] == "learned", res["job"]["view"]
    assert res["learning"]["seconds"] < 60 and res["learning"]["runs"]
    assert res["imbalance"] < BALANCED, why_unbalanced(res)
    times, reference = res["times"], correct["times"]
    if statistics.median(times) > SAME_SPEED * statistics.median(reference):
        # 8 ranks, the switches and the controller share 2 cores: a few seconds of contention
        # slow every iteration of one run (CI once saw 2.19 s against 1.93 s, where the bench
        # measures 1.00x). Measure both once more, back to back, and judge the 6 + 6
        # iterations; a real slowdown (a collision costs 30-100%) misses again.
        again = remeasure(emu, library, scenario)
        assert again["imbalance"] < BALANCED, again["uplinks"]
        times = times + again["times"]
        reference = reference + remeasure(emu, library, "correct")["times"]
    assert statistics.median(times) <= SAME_SPEED * statistics.median(reference), (
        times, reference)
    return res


@EXTENDED  # make test: tests/test_learning_live.py, a ring declared the other way
@pytest.mark.parametrize("library", co.LIBRARIES)
def test_wrong_direction_is_corrected_by_learning(emu, library):
    learned(emu, library, "wrong_learned")


# make test-live only: make test learns a members-only gloo ring from cold and posted again
# (tests/test_learning_live.py; with gloo and Open MPI across a job's whole life:
# tests/test_lifecycle_live.py in make test-live)
@EXTENDED
@pytest.mark.parametrize("library", co.LIBRARIES)
def test_members_only_after_learning_as_fast_as_declared(emu, library):
    learned(emu, library, "members")


@EXTENDED  # make test: tests/test_lifecycle_live.py relaunches after pauses
@pytest.mark.parametrize("library", co.LIBRARIES)
@pytest.mark.parametrize("name", relaunch.VARIANTS)
def test_relaunches_after_pauses_stay_learned_and_as_fast_as_declared(emu, library, name):
    """Issue 22's scenario: launches of 4 iterations, 6 s pauses between them; one job
    (declared by its members or in rank order), a mixture-of-experts job (gloo), or two jobs
    at once (ring All-Reduces). After the first launch every job runs
    within 10% of its correct declaration, the uplinks balanced, every pair planned, and each
    job is (re-)planned at most once after it was learned."""
    if co.missing(library):
        pytest.skip(co.missing(library))
    if name in relaunch.GLOO_ONLY and library != "gloo":
        pytest.skip(f"the {name} variant runs with gloo only")
    if not co.learning_supported(emu.ctl):
        pytest.skip("the controller does not take members-only jobs")
    # two jobs of ring All-Reduces, with gloo too: DistributedDataParallel's launch starts
    # with a broadcast of the model that can be learned as the job's matrix (a known defect,
    # docs/explanation/learning.md; benchmarks.collectives measures it)
    v = relaunch.variant(emu, library, name, emu.hosts, MIB, ddp=False)
    logdir = os.path.join(LOGS, f"{library}-relaunch-{name}")
    res = relaunch.relaunches(emu, library, v, MIB, 4, logdir, launches=3, pause_s=6.0)
    first, *later = res["launches"]
    ref = relaunch.reference(emu, library, v, MIB, 4, os.path.join(logdir, "reference"))
    # one ring: balanced; else as balanced as the correct declaration (a mixture-of-experts
    # leaf sends one ring flow beside three small ones, and DDP broadcasts rank 0's model at
    # each launch on paths no plan holds, so their uplinks differ under any plan)
    bound = BALANCED if len(v.groups) == 1 and not v.a2a_mib else ref["imbalance"] + BALANCED
    for launch in later:
        assert launch["imbalance"] < bound, (launch["uplinks"], ref)
        for job in launch["jobs"]:  # the correct declaration's pairs, all planned
            assert job["matrix"] in ("learned", "declared") and job["unplanned"] == 0, job
    for j in range(len(v.groups)):
        assert later[-1]["jobs"][j]["replans"] - first["jobs"][j]["replans"] <= 1, res
    for j in range(len(v.groups)):
        times = [t for launch in later for t in launch["jobs"][j]["times"]]
        reference = ref["times"][j]
        if statistics.median(times) > SAME_SPEED * statistics.median(reference):  # again
            reference += relaunch.reference(emu, library, v, MIB, 4,
                                            os.path.join(logdir, "reference-again"))["times"][j]
        assert statistics.median(times) <= SAME_SPEED * statistics.median(reference), (
            j, times, reference)


@EXTENDED  # make test: gloo rings declared and learned above, and gloo ranks under the
# PyTorch hook (tests/test_integrations_live.py); DistributedDataParallel: make test-live
def test_two_ddp_jobs_train_with_identical_replicas_and_ring_traffic(emu):
    """Two DistributedDataParallel trainings at once (gloo, 1 MiB gradient buckets): every
    rank ends with bit-identical parameters (SHA-256 on every rank, checked in the rank) and
    each job's gradients go round a ring in gloo's data direction."""
    if co.missing("gloo"):
        pytest.skip(co.missing("gloo"))
    v = relaunch.variant(emu, "gloo", "two_jobs", emu.hosts, MIB)
    assert v.ddp
    res = relaunch.reference(emu, "gloo", v, MIB, 2, os.path.join(LOGS, "gloo-ddp"))
    assert len(res["times"]) == 2 and all(len(t) == 2 for t in res["times"])
    assert res["directions"] == [co.DATA_DIRECTION["gloo"]] * 2


@EXTENDED  # make test: the patterns learned in tests/test_learning_patterns.py
def test_mixture_of_experts_job_by_members_learns_every_pair(emu):
    """gloo, one rank per leaf, every iteration an all-to-all (about a fifth of the bytes,
    each of its pairs under a tenth of a ring pair: 1.7% of the job's bytes) and a ring
    All-Reduce: the job declared by its members is learned with all 12 pairs measured, and
    planned with every pair of 5% of its bytes or more (the ring's). A light pair that no
    sample had reached when the matrix settled joins it later and is planned only if the
    gain test says so, at most one re-plan after learning (docs/explanation/learning.md):
    in one CI run of 2026-11-24 the pair h0_0 -> h1_0 stayed on its hashed path."""
    if not co.learning_supported(emu.ctl):
        pytest.skip("the controller does not take members-only jobs")
    res = run(emu, "gloo", "moe")
    view = res["job"]["view"]
    ranks = res["ranks"]
    assert view["matrix"] == "learned", view
    every = {(a, b) for a in ranks for b in ranks if a != b}
    measured = {(m["src"], m["dst"]): m["bytes"] for m in view["measured_flows"]}
    assert set(measured) == every
    planned = {(r["src"], r["dst"]) for r in view["routes"]}
    heavy = {p for p, b in measured.items() if b >= 0.05 * sum(measured.values())}
    assert len(heavy) == len(ranks) and heavy <= planned <= every, (heavy, planned)
    assert 1 <= view["learning"]["replans"] <= 2


def test_no_rank_or_daemon_left_behind(emu):
    if not emu.runs:
        pytest.skip("no collective ran")
    assert processes(co.RANK_SCRIPT, "orted", co.RSH_AGENT) == []
    logs = [r["logs"] for r in emu.runs.values()]
    assert all(os.path.isdir(d) and os.listdir(d) for d in logs)
