"""The emulation's benchmarks, in one place (``make bench``): each ``python -m benchmarks.NAME``
writes ``bench/NAME.json``, the source of the results page (``docs/results/``). They run the
real controller in Mininet and Open vSwitch (root) through the harness (``emulation/harness/``);
``benchmarks.hostmode``'s first part runs in the process on the fake switch tables.

emulation
    the demo fabric and workload, ECMP against greedy, recovery from a link failure
reconcile
    hitless reconnect and restart at the paper's scale
hostmode
    host-mode probing against flow mode
failover
    redundant controllers: time to a standby's takeover
connect
    a zero-configuration fabric: time to connectivity, discovery's cost
collectives
    PyTorch gloo and Open MPI All-Reduces for each way of declaring the job

The planner benchmarks need no switch and stay with the simulation (``python -m simulation.bench``,
``simulation.bench_learning``).
"""
