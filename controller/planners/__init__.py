"""Planners: pure functions of a problem (``ClosProblem -> ClosRouting`` on any Clos; the
two-tier kernels, ``Problem -> Assignment``, private to them: ``leaf_spine``). ``PLANNERS``:
every name the CLI and REST use, with the one function that runs it (``registry.py``;
``planner_for`` refuses an unknown name)."""
from controller.planners.registry import PLANNERS, planner_for

__all__ = ["PLANNERS", "planner_for"]
