"""Framework-neutral OpenFlow 1.3 messages: what the rule builders return and the shell
translates one to one (``controller/shell/translate.py``), so the core never imports an SDN
framework.

Match fields use the OXM names that Ryu's ``OFPMatch`` takes as keywords (``in_port``,
``eth_type``, ``ipv4_src``, ``ip_proto``, ``tcp_src``, ``udp_dst``, ``mpls_label``,
``mpls_bos`` ...). Actions are tuples:
``("output", port)``, ``("controller",)``, ``("group", group_id)``,
``("push_mpls", ethertype)``, ``("pop_mpls", ethertype)``, ``("set_field", field, value)``;
``goto`` is the instruction's next table, or None.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

ETH_IPV4 = 0x0800
ETH_ARP = 0x0806
ETH_MPLS = 0x8847

# cookie layout: top byte says who owns the rule, the low 32 bits which job
COOKIE_STATIC = 0x01 << 56
COOKIE_JOB = 0x02 << 56
COOKIE_OWNER_MASK = 0xFF << 56
COOKIE_EXACT = (1 << 64) - 1


def job_cookie(job_number: int) -> int:
    return COOKIE_JOB | job_number


@dataclass(frozen=True)
class FlowRule:
    """One flow entry as the controller wants it on a switch."""
    dpid: int
    table: int
    priority: int
    match: tuple  # sorted ((field, value), ...)
    actions: tuple = ()
    goto: int | None = None
    cookie: int = 0

    @cached_property
    def key(self) -> tuple:
        """What identifies an entry on the switch (OpenFlow's strict match); kept on the
        entry (diffs and shadows ask for it several times per entry, hundreds of thousands
        of times for a fabric's static entries)."""
        return (self.dpid, self.table, self.priority, self.match)

    def match_dict(self) -> dict:
        return dict(self.match)


def rule(dpid: int, table: int, priority: int, match: dict, actions=(), goto=None,
         cookie: int = COOKIE_STATIC) -> FlowRule:
    return FlowRule(dpid, table, priority, tuple(sorted(match.items())), tuple(actions), goto,
                    cookie)


@dataclass(frozen=True)
class GroupEntry:
    """A select group: one bucket of actions per member, equal weights."""
    dpid: int
    group_id: int
    buckets: tuple  # (actions tuple, ...)

    @property
    def key(self) -> tuple:
        return (self.dpid, self.group_id)


@dataclass(frozen=True)
class Message:
    """One OpenFlow message for a switch.

    kind: "flow_add" (add or overwrite the entry of ``rule.key``), "flow_delete" (strict
    delete of ``rule.key``), "group_add", "group_modify", "group_delete".
    """
    kind: str
    rule: FlowRule | None = None
    group: GroupEntry | None = None

    @property
    def dpid(self) -> int:
        return self.rule.dpid if self.rule is not None else self.group.dpid


@dataclass
class SwitchState:
    """What the controller believes a switch holds (rules by key, groups by id)."""
    rules: dict = field(default_factory=dict)
    groups: dict = field(default_factory=dict)


def diff(dpid: int, have: SwitchState, want_rules: list[FlowRule],
         want_groups: list[GroupEntry]) -> tuple[list[Message], list[Message]]:
    """Messages that turn ``have`` into the wanted state, as (make, break): first add groups and
    add or overwrite rules, then delete rules and groups no longer wanted. Sending ``make``
    before ``break`` never leaves a wanted flow without a rule. Equal entries send nothing."""
    make, brk = [], []
    wg = {g.group_id: g for g in want_groups}
    for gid, g in wg.items():
        old = have.groups.get(gid)
        if old is None:
            make.append(Message("group_add", group=g))
        elif old != g:
            make.append(Message("group_modify", group=g))
    wr = {r.key: r for r in want_rules}
    for key, r in wr.items():
        if have.rules.get(key) != r:
            make.append(Message("flow_add", rule=r))
    for key, r in have.rules.items():
        if key not in wr:
            brk.append(Message("flow_delete", rule=r))
    for gid, g in have.groups.items():
        if gid not in wg:
            brk.append(Message("group_delete", group=g))
    return make, brk


def diff_jobs(have: SwitchState, want_jobs: list[FlowRule], had_jobs: list[FlowRule]
              ) -> tuple[list[Message], list[Message]]:
    """``diff`` of a switch whose ``have`` holds static entries S plus ``had_jobs`` and
    should hold S plus ``want_jobs``, with S's groups (no job entry has a key of S): the
    same messages in the same order, in O(job entries), plus one pass over ``have`` when
    something is deleted. A switch of 1,100 static entries changes by its jobs' few."""
    wanted = {r.key: r for r in want_jobs}
    make = [Message("flow_add", rule=r) for key, r in wanted.items() if have.rules.get(key) != r]
    gone = {r.key for r in had_jobs} - wanted.keys()
    brk = [Message("flow_delete", rule=r) for key, r in have.rules.items() if key in gone] \
        if gone else []
    return make, brk


def apply(state: SwitchState, messages: list[Message]) -> None:
    """Record messages a switch confirmed."""
    for m in messages:
        if m.kind == "flow_add":
            state.rules[m.rule.key] = m.rule
        elif m.kind == "flow_delete":
            state.rules.pop(m.rule.key, None)
        elif m.kind in ("group_add", "group_modify"):
            state.groups[m.group.group_id] = m.group
        elif m.kind == "group_delete":
            state.groups.pop(m.group.group_id, None)
