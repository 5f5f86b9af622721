"""Experiments around the planner: fluid simulator, workload generator, paper grid, benchmarks."""
