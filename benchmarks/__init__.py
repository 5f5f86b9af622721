"""The benchmarks, in one place (``make bench``): each ``python -m benchmarks.NAME`` writes a
JSON under ``bench/``, the source of the results page (``docs/results/``).

The emulation's benchmarks run the real controller in Mininet and Open vSwitch (root) through
the harness (``emulation/harness/``); ``benchmarks.hostmode``'s first part runs in the process
on the fake switch tables. Each writes ``bench/NAME.json``.

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
zeroconfig
    zero configuration before any host speaks: when the right shape of a fat-tree (k = 4, 8)
    is held, whether a wrong one ever was, the first pingall's loss
collectives
    PyTorch gloo and Open MPI All-Reduces for each way of declaring the job
fattree
    the controller on a k = 4 fat-tree: two rings across pods, planned against Open vSwitch's
    (polarised) ECMP and against the controller's own prediction, bytes per link
scale
    the control plane on fat-trees of bridges (k = 4, 8, 16; ``--quick``: k = 4): entries per
    tier, first start, hitless restart, POST of 128- and 992-flow jobs, a link and an
    aggregation switch failed and back, against the paper's two-tier fabric of the same run

The planner benchmarks need no root and no switch: they run the planners and the fluid model
of ``simulation/`` in the process.

planner
    planning time, optimality against the ILP, splitting, layer 2 and the other traffic
    patterns at the paper's scale (``bench/planner.json``)
learning
    what learning a job's traffic from sFlow costs at the paper's scale (``bench/learning.json``)
fabrics
    the path planners on fat-trees and two-plane leaf-spines (``bench/fabrics.json``)
patterns
    per workload pattern and planner, job slowdowns and the prediction's error
    (``--out bench/patterns.json``)
anytime
    the request path and the off-path stage on the new traffic patterns (``planner``'s
    section 8; ``--out FILE`` alone)
layer2
    links at the max load against the exact layer-2 MILP, job slowdowns (``planner``'s
    section 7; ``--out``, default ``bench/layer2.json``)
pathsets
    path sets for spraying NICs on MRC's shape (8 planes, 131,072 hosts): the ``split``
    planner's time for a spraying job and every flow's path set (``bench/pathsets.json``)
"""
