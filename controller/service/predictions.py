"""The fluid model's All-Reduce time of one iteration per running job, every routable job
starting together, computed once per state version (the model is the slow part of a view).
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from controller.enforcement.desired import installed_plan
from controller.model.fluid import PredictionError, predict_allreduce

LOG = logging.getLogger("mlroute")


class Predictions:
    def __init__(self, on_progress: Callable[[], None] | None = None):
        self.on_progress = on_progress  # cooperative yield during the model
        self._cache: tuple[int, dict] = (-1, {})

    def of(self, state, job_id: str) -> dict:
        """{"seconds": s} or {"seconds": None, "error": why} for one job."""
        version, cached = self._cache
        if version != state.version:
            cached = predict_all(state, self.on_progress)
            self._cache = (state.version, cached)
        return cached.get(job_id, {"seconds": None, "error": "not predicted"})


def predict_all(state, on_progress=None) -> dict:
    """Predictions of every job. A job with unroutable flows, or a model that cannot finish
    within its bound, gets no figure and the reason."""
    out, routable = {}, []
    f = state.fabric
    for r in state.jobs.values():
        bad = r.unroutable()
        if bad:
            out[r.job.id] = {"seconds": None, "error": (
                f"{len(bad)} flows have no alive spine (leaves {f.hosts[bad[0].src]} and "
                f"{f.hosts[bad[0].dst]} first)")}
        elif not r.job.flows():
            out[r.job.id] = {"seconds": None, "error": "no flow to predict yet (learning)"}
        else:
            routable.append(r)
    plan = installed_plan(f, routable) if routable else None
    if plan is None:
        return out
    try:
        times = predict_allreduce(plan, on_event=on_progress)
    except PredictionError as e:
        LOG.error("mlroute: prediction failed: %s", e)
        return {**out, **{r.job.id: {"seconds": None, "error": f"prediction failed: {e}"}
                          for r in routable}}
    for r in routable:
        out[r.job.id] = {"seconds": times.get(r.job.id)}
    return out
