"""The predicted All-Reduce time of one iteration per running job, every routable job starting
together, computed once per state version (the model is the slow part of a view).

The figure is the shared prediction of ``model.iteration`` (``predict_times``), the one the
``jobs`` objective ranks plans by and the benchmarks report, on the installed routes of every
running job: a job's view and the planner that chose its routes state the same number. The
fluid model (``model.fluid``) stays the reference that prediction is tested against
(tests/test_iteration.py: within ``iteration.TOLERANCE`` on every job of every workload
pattern); the view does not run it as well, because it would show a second figure that differs
by up to that tolerance, and it costs more on the controller's event loop: one event per flow
part of every ring step, against one per distinct end time of a ring or an explicit flow
(greedy plans, measured when the view changed model: 64x32 at 90% of hosts in rings, 4 ms
against 37 ms; 16,128 all-to-all flows at 64x32, 75 ms against 131 ms).

Cost: O(events x rounds x nnz), events <= rings + explicit flows; ``on_progress()`` is called
once per event, so a cooperative event loop keeps serving while the model runs.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from controller.enforcement.desired import installed_plan

LOG = logging.getLogger("mlroute")


class Predictions:
    def __init__(self, on_progress: Callable[[], None] | None = None):
        self.on_progress = on_progress  # cooperative yield during the model
        self._cache: tuple[int, dict] = (-1, {})

    def of(self, state, job_id: str, current: Callable[[], object] | None = None) -> dict:
        """{"seconds": s} or {"seconds": None, "error": why} for one job. ``current``: the
        installed plan of every running job, as the caller keeps it (else built here)."""
        version, cached = self._cache
        if version != state.version:
            cached = predict_all(state, self.on_progress, current)
            self._cache = (state.version, cached)
        return cached.get(job_id, {"seconds": None, "error": "not predicted"})


def predict_all(state, on_progress=None, current: Callable[[], object] | None = None) -> dict:
    """Predictions of every job. A job with unroutable flows, or a model that cannot finish
    (no entity can progress), gets no figure and the reason. ``current()``: the installed
    plan of all running jobs, used when every job is predicted (1,120 flows at k = 16: 30 ms
    to build again)."""
    out, routable = {}, []
    f = state.fabric
    for r in state.jobs.values():
        bad = r.unroutable()
        if bad:
            out[r.job.id] = {"seconds": None, "error": (
                f"{len(bad)} flows have no alive path (leaves {f.leaves_named(bad[0].src)} "
                f"and {f.leaves_named(bad[0].dst)} first)")}
        elif not r.job.flows():
            out[r.job.id] = {"seconds": None, "error": "no flow to predict yet (learning)"}
        else:
            routable.append(r)
    if routable and current is not None and len(routable) == len(state.jobs):
        plan = current()
    else:
        plan = installed_plan(f, routable) if routable else None
    if plan is None:
        return out
    try:
        times = plan_times(plan, on_progress)
    except ValueError as e:
        LOG.error("mlroute: prediction failed: %s", e)
        return {**out, **{r.job.id: {"seconds": None, "error": f"prediction failed: {e}"}
                          for r in routable}}
    for r in routable:
        out[r.job.id] = {"seconds": times.get(r.job.id)}
    return out


def plan_times(plan, on_progress=None) -> dict[str, float]:
    """The shared prediction (``model.iteration``) of a plan on either fabric model: on a
    Clos the split routes' (by share), on two tiers the spines' (``predicted_times``)."""
    return plan.predicted_times(on_progress)
