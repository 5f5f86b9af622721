"""Planners: pure functions ``Problem -> Assignment``. Registry by the names the CLI and REST use."""
from controller.planners.annealing import annealing
from controller.planners.auto import auto
from controller.planners.ecmp import ecmp
from controller.planners.edge_coloring import edge_coloring
from controller.planners.greedy import greedy
from controller.planners.ilp import ilp
from controller.planners.split import split

ALGORITHMS = {
    "greedy": greedy,
    "ecmp": ecmp,
    "edge-coloring": edge_coloring,
    "annealing": annealing,
    "ilp": ilp,
    "split": split,
    "auto": auto,
}

__all__ = ["ALGORITHMS", "annealing", "auto", "ecmp", "edge_coloring", "greedy", "ilp", "split"]
