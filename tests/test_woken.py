"""Woken watches answered on the hub as each document is built (``woken.serve``, issue 73):
a send that does not wait; what a socket does not take at once is left to the batch's
thread, which sends it whole; a connection whose client went away is closed."""
import socket
import struct
import threading

from controller.shell import woken


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """(server end, client end) of a loopback connection, as the front's are."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname(), timeout=10)
        return listener.accept()[0], client


def test_the_hub_sends_what_a_socket_takes_and_leaves_the_rest(monkeypatch):
    big = b"x" * (8 << 20)  # more than any socket buffer takes at once
    monkeypatch.setattr(woken, "documents",
                        lambda service, hosts: {h: (200, big if h == "big" else b"{}\n")
                                                for h in hosts})
    small_s, small_c = tcp_pair()
    big_s, big_c = tcp_pair()
    gone_s, gone_c = tcp_pair()
    gone_c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    gone_c.close()  # reset: the next send fails
    try:
        left = woken.serve(None, [(small_s, None, b"", True, "small"),
                                  (big_s, None, b"", True, "big"),
                                  (gone_s, None, b"", True, "gone")], "a date")
        assert left[0] == b"" and small_c.recv(4096).endswith(b"\r\n\r\n{}\n")
        assert left[2] is None  # its client went away: closed by the thread
        assert 0 < len(left[1]) < len(big)  # the socket took part of it, not all

        got = bytearray()

        def read():
            while chunk := big_c.recv(1 << 20):
                got.extend(chunk)

        reader = threading.Thread(target=read)
        reader.start()
        closed = []
        ww = woken.WokenWatches(rest=None, closing=lambda s: (closed.append(s), s.close()))
        ww.answer(big_s, None, b"GET / HTTP/1.1\r\n\r\n", True, left[1])
        reader.join(10)
        assert not reader.is_alive() and closed == [big_s]
        assert got.startswith(b"HTTP/1.1 200 OK\r\n") and got.endswith(big)
    finally:
        for s in (small_s, small_c, big_s, big_c, gone_s):
            s.close()


def test_a_rings_woken_watches_are_one_call_on_the_hub_the_hub_free_between_chunks(
        monkeypatch):
    """Issue 73: 130 woken watches are answered in one call on the hub (it was one call per
    64, the hub idle between them while the thread took the answers), in chunks of
    ``BATCH`` with the hub's other green threads let run between them (``pause``)."""
    import time
    monkeypatch.setattr(woken, "documents",
                        lambda service, hosts: {h: (200, b"{}\n") for h in hosts})
    calls, pauses, given = [], [], []

    class Front:
        def adopt(self, sock, addr, rest):
            given.append(sock)

    class Rest:
        _stop = False
        service = None
        front = Front()
        hub = type("Hub", (), {"sleep": staticmethod(lambda s: pauses.append(s))})()

        def on_hub(self, fn, *args):
            calls.append(len(args[1]))
            return fn(*args)

    pairs = [tcp_pair() for _ in range(130)]
    rest = Rest()
    ww = woken.WokenWatches(rest, closing=lambda s: s.close())
    ww.put([(s, None, b"GET / HTTP/1.1\r\n\r\n", False, f"h{i}")
            for i, (s, _c) in enumerate(pairs)])
    runner = threading.Thread(target=ww.run)
    runner.start()
    try:
        deadline = time.monotonic() + 10
        while len(given) < 130:
            assert time.monotonic() < deadline, len(given)
            time.sleep(0.01)
    finally:
        rest._stop = True
        runner.join(5)
    assert calls == [130] and pauses == [0, 0]  # chunks of 64, 64 and 2
    assert all(c.recv(4096).startswith(b"HTTP/1.1 200 OK\r\n") for _s, c in pairs)
    for s, c in pairs:
        s.close()
        c.close()
