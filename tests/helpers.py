"""Small builders shared by the unit tests."""
from controller.model.fabric import Fabric
from controller.model.jobs import Flow, Job


def fabric(spines=4, leaves=8, hosts=2, failed_spines=0, down=()):
    f = Fabric.generate(spines, leaves, hosts, 100.0, failed_spines)
    return f.with_down(f.down | set(down)) if down else f


def flows_job(pairs, size=1e6, jid="j"):
    """A job of explicit flows between (src, dst) host pairs."""
    return Job(jid, explicit=[Flow(jid, s, d, size) for s, d in pairs])


def ring_job(ranks, size=8e6, jid="r"):
    return Job(jid, rings=[list(ranks)], ring_bytes=size)


class FakeClock:
    """Time that moves only when told: ``clock()`` reads it, ``clock.sleep(s)`` advances it."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s
