"""Slow planning off the request path: ``auto`` with its ILP stage, in a child process.

The controller installs the best fast plan at once (auto without ILP) and, when optimality is
not proven, asks this module for a better routing within the ILP budget. HiGHS is C code that
would hold the controller's only OS thread (and with it OpenFlow echo replies) for the whole
budget, so it runs as ``python -m controller plan`` in a subprocess; under eventlet the wait
is cooperative.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from controller.errors import InputError
from controller.model.problem import Assignment, Problem

GRACE_S = 30.0  # start-up and output on top of the ILP budget


def plan_in_subprocess(problem: Problem, ilp_time_limit: float, objective: str = "flows"
                       ) -> Assignment:
    """``auto`` on ``problem`` with the ILP stage, in a child process; the unsplit routing
    aligned with ``problem.inter`` and auto's ``info``. Raises InputError on failure."""
    fabric = problem.fabric
    jobs = {"jobs": [j.to_dict() for j in problem.jobs]}
    for doc in jobs["jobs"]:
        for k in ("algorithm", "mode", "objective"):
            doc.pop(k, None)
    with tempfile.TemporaryDirectory(prefix="mlroute-ilp-") as tmp:
        fpath, jpath = os.path.join(tmp, "fabric.json"), os.path.join(tmp, "jobs.json")
        with open(fpath, "w") as fh:
            json.dump(fabric.to_dict(), fh)
        with open(jpath, "w") as fh:
            json.dump(jobs, fh)
        cmd = [sys.executable, "-m", "controller", "plan", "--algorithm", "auto",
               "--objective", objective, "--ilp-time-limit", str(ilp_time_limit),
               "--fabric", fpath, "--jobs", jpath]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, cwd=_repo(),
                                 timeout=ilp_time_limit + GRACE_S)
        except subprocess.TimeoutExpired:
            raise InputError(f"off-path planning did not finish within "
                             f"{ilp_time_limit + GRACE_S:g} s") from None
    if out.returncode != 0:
        raise InputError(f"off-path planning failed: {out.stderr.strip()[-300:]}")
    doc = json.loads(out.stdout)
    index = fabric.spine_index
    spines = [index[doc["routes"][pos]["spine"]] for pos in problem.inter]
    return Assignment.unsplit(spines, doc.get("info", {}))


def _repo() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
