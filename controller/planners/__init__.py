"""Planners: pure functions of a problem (``Problem -> Assignment`` on a single two-tier plane,
``ClosProblem -> ClosRouting`` on any Clos). ``PLANNERS``: every name the CLI and REST use, with
how it runs on each fabric shape (``registry.py``; ``planner_for`` refuses what a shape cannot
run)."""
from controller.planners.registry import PLANNERS, planned_as, planner_for

__all__ = ["PLANNERS", "planned_as", "planner_for"]
