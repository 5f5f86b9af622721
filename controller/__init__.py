"""mlroute: route ML training traffic over a leaf-spine fabric.

The pure core (fabric, jobs, problem, planners, loads, rates, plan) imports no SDN framework;
the Ryu shell lives in one module of its own.
"""
__version__ = "0.1.0"
