"""The controller's configuration as one checked value (the shell builds it from its options).

>>> Settings(algorithm="greedy").mode
'flow'
>>> Settings(over_budget="drop")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
controller.errors.InputError: rule budget: ... over budget one of refuse, host
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller.enforcement.modes import check_ecmp, mode_of
from controller.errors import InputError
from controller.measurement.learner import SAMPLING_POINTS
from controller.planners.registry import OBJECTIVES, names

OVER_BUDGET = ("refuse", "host")
ILP_TIME_LIMIT_S = 10.0  # the ilp planner's and auto's ILP stage's budget (controller, plan)


@dataclass(frozen=True)
class Settings:
    # planner of jobs that do not ask for one: any name of the registry (``planners.PLANNERS``),
    # which runs on every fabric
    algorithm: str = "auto"
    mode: str = "flow"  # enforcement of jobs that do not ask for one
    # auto's objective of jobs that do not ask for one: jobs lowers the mean job slowdown by
    # 7% against flows (1.565 against 1.682), at 15-87 ms instead of 2.5-14 ms for the full
    # search (bench/planner.json, section layer2: 10 realistic 64 x 32 clusters); the
    # controller runs it off the request path
    objective: str = "jobs"
    planner_opts: dict = field(default_factory=dict)  # algorithm -> planner options
    dead_after: float = 3.0  # seconds a disconnected switch counts as still forwarding
    # switches lost together (``restarts.py``): at least restart_quorum (and 2) disconnecting
    # within restart_window s of the first are a restart round, not failed until they are all
    # back or restart_grace s passed (SONiC's fast-reboot allows its data plane 25 s; an
    # Open vSwitch restart took up to 23 s); 0: no rounds
    restart_grace: float = 30.0
    restart_quorum: int = 3
    restart_window: float = 1.0
    resolve_timeout: float = 3.0  # seconds to find a host by ARP probes
    link_gbps: float | None = None  # speed of a discovered fabric's links (None: default)
    hold_down: float = 5.0  # seconds a returned link must stay up before re-optimising
    max_flow_rules: int = 0  # flow entries per switch (0: no budget)
    over_budget: str = "refuse"  # a job over the budget: refuse (409) or plan it in host mode
    learn_window: float = 2.0  # seconds per window of measured traffic (learned matrices)
    learn_min_gain: float = 0.05  # predicted iteration gain a re-plan on measured traffic needs
    learn_replans_per_minute: int = 2  # re-plans of one job on measured matrices per minute
    learn_min_rate: float = 0.001  # members sending each other less, as a share of a link: noise
    sampling_points: str = "all"  # where switches sample: all, leaves or edge (host ports)
    ecmp: str = "per-tier"  # a Clos's aggregation switches: hash apart from the leaves or alike
    # no OpenFlow (``pathstate.py``): hosts whose failed probes must blame a direction of a
    # link before it is taken down (one host can neither fake nor flap a link)
    probe_quorum: int = 2

    def __post_init__(self):
        if self.algorithm not in names():
            raise InputError(f"unknown algorithm {self.algorithm!r} (choose from "
                             f"{', '.join(names())})")
        if self.objective not in OBJECTIVES:
            raise InputError(f"unknown objective {self.objective!r} (choose from "
                             f"{', '.join(OBJECTIVES)})")
        mode_of(self.mode)
        if self.max_flow_rules < 0 or self.over_budget not in OVER_BUDGET:
            raise InputError(f"rule budget: max flow rules must be >= 0 (0: none) and over "
                             f"budget one of {', '.join(OVER_BUDGET)}")
        if not self.learn_window > 0 or not 0 <= self.learn_min_gain < 1 or \
                self.learn_replans_per_minute < 1:
            raise InputError("learning: the window must be > 0 s, the minimum gain in [0, 1) "
                             "and re-plans per minute at least 1")
        if self.restart_grace < 0 or self.restart_window < 0 or self.restart_quorum < 2:
            raise InputError("restart rounds: the grace and the window must be >= 0 s and the "
                             "quorum at least 2 switches")
        check_ecmp(self.ecmp)
        if isinstance(self.probe_quorum, bool) or not isinstance(self.probe_quorum, int) \
                or self.probe_quorum < 1:
            raise InputError(f"probe quorum must be a whole number of hosts >= 1, not "
                             f"{self.probe_quorum!r}")
        if self.sampling_points not in SAMPLING_POINTS:
            raise InputError(f"sFlow sampling points must be one of "
                             f"{', '.join(SAMPLING_POINTS)}, not {self.sampling_points!r}")

    @property
    def ilp_budget(self) -> float:
        """Seconds of auto's ILP stage, run off the request path (0: never)."""
        return (self.planner_opts.get("auto") or {}).get("ilp_time_limit", 0.0)
