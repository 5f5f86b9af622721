"""Simulation experiments (no root, no switch): the fluid simulator, workloads, the grids,
planner benchmarks."""
