"""``MatrixLearning.follow``: the sampling maps follow the fabric object, read once per
object (the service calls it every second; a change of hosts or links is a new ``Clos``)."""
from controller.service.matrices import MatrixLearning
from topologies.clos import clos_fabric


def test_a_fabric_seen_last_time_is_not_read_again_and_a_new_one_is(monkeypatch):
    m = MatrixLearning(1.0)
    f = clos_fabric(2, 3, 2)
    reads = []
    real = type(f).interfaces
    monkeypatch.setattr(type(f), "interfaces", lambda self: reads.append(self) or real(self))
    m.follow(f)
    m.follow(f)
    assert reads == [f]
    ip = f.host_ip["h0_0"]
    assert m._canon[ip] == ip
    g = f.with_down([("l0", "s0")])  # a change: a new object, read again
    m.follow(g)
    assert reads == [f, g] and m._canon[ip] == ip
    m.follow(None)
    assert m._canon == {}
    m.follow(g)  # after None, the same object again is read
    assert reads == [f, g, g]
