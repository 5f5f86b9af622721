"""Learning across a job's ordinary life on real Open vSwitch, with real gloo and Open MPI jobs
(issue 36, ``emulation/harness/lifecycle.py``): a controller started cold, jobs posted by
their members, declared the wrong way, launched, paused, relaunched, deleted and posted again
under a new id, two jobs at once; on a leaf-spine the controller discovers with no
configuration at all and on a declared k = 4 fat-tree. Every job is learned by the end of its
second launch, its later launches run within 10% of the correct declaration, and it is
re-planned at most once after it was learned. The other fabrics, libraries and cases run in
``python -m benchmarks.learning --lifecycle`` (bench/learning.json)."""
import json
import os
import time

import pytest

from emulation.harness import collectives as co
from emulation.harness import lifecycle as lc
from tests.integration import ext, require_root_and_ovs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

LOGS = os.path.join(co.LOG_ROOT, "tests-lifecycle-" + time.strftime("%Y%m%d-%H%M%S"))
# shape, declared, library, cases (the first meets a fresh controller), link Mbit/s: all in
# `make test-live` (2-6 minutes each). `make test` proves the same lifecycle (a members-only job
# from a cold controller, learned, deleted, posted again under a new id, learned again) with
# iperf3 rings: tests/test_learning_live.py.
SEQUENCES = [
    ext("leaf-spine", False, "gloo", ["repost"], 20.0),
    ext("leaf-spine", False, "gloo", ["members", "wrong"], 20.0),
    ext("fat-tree", True, "mpi", ["members", "two_jobs"], 10.0),
]


def _id(seq) -> str:
    s = seq.values if hasattr(seq, "values") else seq
    return f"{s[0]}-{'declared' if s[1] else 'zero-config'}-{s[2]}-{'-'.join(s[3])}"


@pytest.mark.parametrize("shape,declared,library,cases,bw", SEQUENCES,
                         ids=[_id(s) for s in SEQUENCES])
def test_jobs_are_learned_by_their_second_launch_across_their_life(
        tmp_path, shape, declared, library, cases, bw):
    require_root_and_ovs()
    if co.missing(library):
        pytest.skip(co.missing(library))
    logdir = os.path.join(LOGS, f"{shape}-{library}-{'-'.join(cases)}")
    with lc.Emulation(shape, declared, bw, str(tmp_path)) as emu:
        res = lc.sequence(emu, library, cases, mib=2, iters=3, pause_s=4.0, logdir=logdir)
    os.makedirs(logdir, exist_ok=True)
    with open(os.path.join(logdir, "result.json"), "w") as fh:  # what a failure looks at
        json.dump(res, fh, indent=1, default=str)
    assert [c["case"] for c in res["cases"]] == cases
    assert res["cases"][0]["controller"] == "fresh"
    assert all(len(c["launches"]) == lc.LAUNCHES for c in res["cases"])
    repost = [c for c in res["cases"] if c["case"] == "repost"]
    assert all(c["first_post"]["jobs"][0]["learned_by_second_launch"] for c in repost)
    assert lc.failures(res) == [], f"{lc.failures(res)}; result in {logdir}"
