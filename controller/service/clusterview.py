"""The document of ``GET /v1/cluster``: this controller's role and its switches' roles, the
members (with shared mastership, how many switches each masters), the master, its generation,
the intent store's health and the writes in flight."""
from __future__ import annotations


def cluster_view(c) -> dict:
    """``GET /v1/cluster`` of a member (``cluster.Cluster``). It says "master" only while
    etcd confirms it (``confirmed_master``): a master frozen past its lease, or cut off from
    etcd, says "standby" with ``unconfirmed_master`` until it knows."""
    confirmed = c.confirmed_master()
    with c._lock:
        roles = list(c.switch_roles.values())
        unconfirmed = c.role == "master" and not confirmed
        master_id = c.master["id"] if c.master else None
        if master_id == c.id and not confirmed:  # also once its role went, before its master
            master_id = None
        members = [{"id": mid, "rest": m.get("rest"),
                    "role": "master" if mid == master_id else "standby"}
                   for mid, m in sorted(c.members.items())]
        me = {"id": c.id, "role": "master" if confirmed else "standby",
              "rest": c.rest_url, "serving": c.serving and not unconfirmed,
              "since": c.role_since,
              "switches": {"master": roles.count("master"), "slave": roles.count("slave"),
                           "failed": sum(r not in ("master", "slave") for r in roles)}}
        if unconfirmed:
            me["unconfirmed_master"] = True
        if c.shares is not None:  # switches each member masters, of those seen here
            owned = c.shares.count(c.switch_roles)
            for m in members:
                m["switches"] = owned.get(m["id"], 0)
        return {
            "self": me, "members": members, "etcd": c.client.url, "master": master_id,
            "generation": c.generation, "healthy": c.healthy,
            "unsaved": c.store.unsaved is not None, "state_revision": c.state_revision,
            "operations": c.writes.view(),
            "takeover": dict(c.takeover)}


def standalone_view(member_id: str | None = None) -> dict:
    """``GET /v1/cluster`` of a controller without etcd: it is the only member and the master."""
    me = {"id": member_id or "standalone", "role": "master"}
    return {"self": dict(me), "members": [me], "etcd": None}
