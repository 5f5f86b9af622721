"""The native REST front's deadline heap (``front.py``, issue 73): one live entry per
connection, however many watches a kept-alive connection makes one after another."""
import os
import socket

from controller.shell.front import Front

WATCH = b'GET /v1/hosts/h1/segments HTTP/1.1\r\nIf-None-Match: "v1"\r\nPrefer: wait=1\r\n\r\n'


def refuse(*_):
    raise RuntimeError("no thread in this test")


def test_a_kept_alive_connections_watches_keep_the_heap_the_size_of_the_connections():
    clock = [100.0]
    listener = socket.create_server(("127.0.0.1", 0))
    front = Front(listener, lambda method, path: None, refuse, lambda: True, 3600.0, refuse,
                  watch=lambda path, fields: ("h1", "v1", 1.0), version=lambda host: "v1")
    front._clock = lambda: clock[0]
    ours, theirs = socket.socketpair()
    theirs.settimeout(5)
    try:
        front.adopt(ours, None, b"")
        front._woken()
        c = front.conns[ours.fileno()]
        for _ in range(300):  # a watch, its wait ended (304), the next on the same connection
            front._readable(c, clock[0], WATCH)
            assert c.watch is not None and front.watching == 1
            clock[0] += 1.0
            front._sweep(clock[0])
            assert theirs.recv(4096).startswith(b"HTTP/1.1 304 Not Modified\r\n")
            assert c.watch is None
        assert len(front._due) <= 2 * len(front.conns) + 65  # was one entry per watch: 301
        clock[0] += 3600.0
        front._sweep(clock[0])  # its idle deadline still kept: closed
        assert not front.conns and theirs.recv(16) == b""
    finally:
        theirs.close()
        ours.close()
        listener.close()
        os.close(front._wake_r)
        os.close(front._wake_w)


def test_every_connection_the_front_accepts_has_tcp_keepalive_so_a_dead_watcher_goes():
    """Issue 73: a watch is held for minutes; one whose peer died without a FIN is closed by
    the kernel's keepalive (``KEEPALIVE``: 60 s idle, then 3 probes 10 s apart), set once on
    the listener and passed on to what it accepts, not a system call per connection."""
    import time

    from controller.shell.front import KEEPALIVE
    listener = socket.create_server(("127.0.0.1", 0))
    front = Front(listener, lambda method, path: None, refuse, lambda: True, 3600.0, refuse,
                  watch=lambda path, fields: ("h1", "v1", 300.0), version=lambda host: "v1")
    listener.setblocking(False)
    client = socket.create_connection(listener.getsockname(), timeout=5)
    try:
        deadline = time.monotonic() + 5
        while not front.conns:
            assert time.monotonic() < deadline, "not accepted"
            front._accept(time.monotonic())
            time.sleep(0.01)
        (c,) = front.conns.values()
        client.sendall(WATCH.replace(b"wait=1", b"wait=300"))
        deadline = time.monotonic() + 5
        while c.watch is None:
            assert time.monotonic() < deadline, "not parked"
            front._readable(c, time.monotonic())
        assert c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert [c.sock.getsockopt(socket.IPPROTO_TCP, getattr(socket, name)) for name in
                ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT")] == list(KEEPALIVE)
        assert c.watch[2] - time.monotonic() > 290  # held for its whole wait
    finally:
        client.close()
        for c in list(front.conns.values()):
            front._close(c)
        listener.close()
        os.close(front._wake_r)
        os.close(front._wake_w)
