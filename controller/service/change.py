"""A decided change of the controller's intent, as one value.

Every operation (a job posted or deleted, a link or switch change, a re-optimisation, an
improved plan, a fabric declared or discovered, a learned matrix) is first decided by a pure
function of ``decide.py``, which returns a ``Change``; ``transaction.apply`` then does the rest
the same way for all of them. Nothing of a decision is passed sideways.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller.model.clos import Clos
from controller.service.replanning import Replanned


@dataclass
class Change:
    cause: str  # what happened, for events and logs
    jobs: dict  # job id -> JobRecord: the intent after the change
    fabric: Clos | None = None  # the effective fabric after it (None: unchanged)
    declared: Clos | None = None  # the declared fabric after it (None: unchanged)
    replanned: Replanned | None = None  # the planners' run, if any
    new_job: str | None = None  # the job this change adds (it takes the next number)
    offline_check: bool = True  # refuse job rules for switches that are not synchronised
    fabric_stands: bool = False  # a failed change still takes the new effective fabric
    event: dict | None = None  # fields of the event to record (None: no event)
    answer: dict = field(default_factory=dict)  # what the operation reports besides rules

    @property
    def moved_flows(self) -> int:
        """Running flows the change moves to another spine (0 when nothing was planned).

        >>> Change("job a deleted", {}).moved_flows
        0
        >>> Change("re-planned", {}, replanned=Replanned({}, moved_flows=3)).moved_flows
        3
        """
        return self.replanned.moved_flows if self.replanned else 0

    @property
    def moved_why(self) -> str:
        """Why the re-plan moved the running flows it moved, one sentence per auto group
        that had flows running (named, ``|`` between them, when there are several); "" when
        nothing ran.

        >>> why = {("auto", "flows"): "no running flow moved"}
        >>> Change("re-planned", {}, replanned=Replanned({}, why=why)).moved_why
        'no running flow moved'
        >>> why[("auto", "jobs")] = "2 running flows moved: 2 lost their route"
        >>> Change("re-planned", {}, replanned=Replanned({}, why=why)).moved_why.split(" | ")[1]
        'auto (jobs): 2 running flows moved: 2 lost their route'
        """
        why = self.replanned.why if self.replanned else {}
        if len(why) == 1:
            return next(iter(why.values()))
        return " | ".join(f"{alg} ({objective}): {text}"
                         for (alg, objective), text in sorted(why.items()))

    @property
    def plane_changes(self) -> list[dict]:
        """Running flows the change moves to another plane (their hosts must reconnect)."""
        return self.replanned.plane_changes if self.replanned else []


@dataclass
class Outcome:
    """What applying a change did.

    >>> Outcome({"added": 12, "removed": 4, "switches": 3, "seconds": 0.002}).rules
    {'added': 12, 'removed': 4, 'switches': 3}
    """
    stats: dict  # rule counts and time of the make-before-break installation
    port_changes: list = field(default_factory=list)  # host mode: connections to move
    # shared switch mastership: members that did not confirm their share of it in time
    members_pending: list = field(default_factory=list)

    @property
    def rules(self) -> dict:
        """Rule counts as the API reports them."""
        return {k: self.stats[k] for k in ("added", "removed", "switches") if k in self.stats}
