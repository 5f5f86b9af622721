"""GET latency on a busy eventlet hub: a green server on the hub against a native thread.

A standalone model of the controller under Ryu (no OVS, no Ryu, no service): the process
monkey-patches the standard library as ``ryu-manager`` does (``eventlet.monkey_patch()``,
threading included), then keeps its one hub busy with

* ``--datapaths`` green threads (320: a k = 16 fat-tree's switches), each spinning the CPU
  for ``--slice-ms`` (0.3 ms: Ryu parsing a message) and yielding (``eventlet.sleep(0)``), or
  sleeping ``--dp-gap-ms`` between slices when that is positive (a lighter load);
* one green thread doing ``--stretch-ms`` (10 ms: the service's pacing budget, ``pacing.py``)
  stretches between yields;

and serves ``GET /`` with a precomputed JSON body (``--body-kb``) on two ports at once:

* ``green``: ``eventlet.wsgi`` on the hub (as the shell's ``hub.spawn(self.rest.serve)``);
* ``native``: one OS thread (``eventlet.patcher.original("threading")``) with an original
  (unpatched) socket and a plain accept-and-answer loop; it only reads a bytes reference.

A client in a child process (no eventlet) sends ``--requests`` GETs to each server in turn,
``--interval-ms`` apart with jitter, a new connection each (a readiness probe's pattern; with
``--keep-alive`` one connection for all), and prints percentiles and the maximum of the
latency (connect to the last byte of the answer; ``*_connect``: the TCP connect alone), as
JSON when ``--json`` names a file.

    nice -n 15 .venv/bin/python benchmarks/rest_thread_latency.py --requests 300
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time

import eventlet
from eventlet import wsgi
from eventlet.patcher import original

_socket = original("socket")
_threading = original("threading")
_time = original("time")


def spin(seconds: float) -> None:
    end = _time.perf_counter() + seconds
    while _time.perf_counter() < end:
        pass


def datapath(slice_s: float, gap_s: float) -> None:
    while True:
        spin(slice_s)
        eventlet.sleep(gap_s * random.uniform(0.5, 1.5) if gap_s > 0 else 0)


def service(stretch_s: float) -> None:
    while True:
        spin(stretch_s)
        eventlet.sleep(0)


def green_server(sock, body: bytes) -> None:
    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "application/json"),
                                  ("Content-Length", str(len(body)))])
        return [body]
    wsgi.server(sock, app, log_output=False)


def native_server(sock, body: bytes) -> None:
    """An accept loop and one request per connection (or keep-alive) on one OS thread."""
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n")

    def conn_loop(conn):
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                _, buf = buf.split(b"\r\n\r\n", 1)
                conn.sendall(head + body)

    while True:
        conn, _ = sock.accept()
        conn.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        _threading.Thread(target=conn_loop, args=(conn,), daemon=True).start()


# a control: a process of its own, as nice as the others, that sleeps 2 ms at a time and notes
# when it woke more than 20 ms late (the machine did not run it: CPU contention, not the hub)
STALLS = r"""
import json, sys, time
end = time.perf_counter() + float(sys.argv[1])
while time.perf_counter() < end:
    t0 = time.perf_counter()
    time.sleep(0.002)
    late = time.perf_counter() - t0 - 0.002
    if late > 0.02:
        print(json.dumps([t0, late]), flush=True)
"""

CLIENT = r"""
import http.client, json, random, socket, sys, time
ports, n, interval, keep = json.loads(sys.argv[1])
out = {}
for name, port in ports.items():
    lat, conn, connects, starts = [], None, [], []
    for i in range(n):
        time.sleep(interval * random.uniform(0.5, 1.5))
        t0 = time.perf_counter()
        starts.append(t0)
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.connect()
            connects.append((time.perf_counter() - t0) * 1e3)
        conn.request("GET", "/v1/ready")
        r = conn.getresponse(); r.read()
        lat.append((time.perf_counter() - t0) * 1e3)
        if not keep:
            conn.close(); conn = None
    out[name] = lat
    out[name + "_connect"] = connects
    out[name + "_start"] = starts
print(json.dumps(out))
"""


def stats(lat: list[float]) -> dict:
    s = sorted(lat)
    q = lambda p: s[min(len(s) - 1, int(p / 100 * len(s)))]  # noqa: E731
    return {"n": len(s), "p50": round(q(50), 2), "p90": round(q(90), 2), "p99": round(q(99), 2),
            "max": round(s[-1], 2), "mean": round(sum(s) / len(s), 2)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datapaths", type=int, default=320)
    p.add_argument("--slice-ms", type=float, default=0.3)
    p.add_argument("--dp-gap-ms", type=float, default=0.0)
    p.add_argument("--stretch-ms", type=float, default=10.0)
    p.add_argument("--body-kb", type=float, default=0.1)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--interval-ms", type=float, default=50.0)
    p.add_argument("--keep-alive", action="store_true")
    p.add_argument("--switch-interval-ms", type=float, default=None,
                   help="sys.setswitchinterval (default: Python's 5 ms)")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    if a.switch_interval_ms is not None:
        sys.setswitchinterval(a.switch_interval_ms / 1e3)
    body = (json.dumps({"ready": True, "pad": "x" * int(a.body_kb * 1024)}) + "\n").encode()
    green = eventlet.listen(("127.0.0.1", 0))
    native = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    native.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    native.bind(("127.0.0.1", 0))
    native.listen(128)
    eventlet.spawn(green_server, green, body)
    _threading.Thread(target=native_server, args=(native, body), daemon=True).start()
    for _ in range(a.datapaths):
        eventlet.spawn(datapath, a.slice_ms / 1e3, a.dp_gap_ms / 1e3)
    if a.stretch_ms > 0:
        eventlet.spawn(service, a.stretch_ms / 1e3)
    # measure the hub's cycle: how late a sleep(0) comes back
    cycles = []
    for _ in range(20):
        t0 = time.perf_counter()
        eventlet.sleep(0)
        cycles.append((time.perf_counter() - t0) * 1e3)
    ports = {"green": green.getsockname()[1], "native": native.getsockname()[1]}
    # the client is a child process, waited for with a green wait (the hub keeps running)
    budget = 2 * a.requests * (a.interval_ms / 1e3 + 0.5) + 30
    stall_proc = subprocess.Popen([sys.executable, "-c", STALLS, str(budget)],
                                  stdout=subprocess.PIPE)
    proc = subprocess.Popen([sys.executable, "-c", CLIENT,
                             json.dumps([ports, a.requests, a.interval_ms / 1e3, a.keep_alive])],
                            stdout=subprocess.PIPE)
    out, _ = proc.communicate()
    stall_proc.kill()  # the control ends with the measurement; its lines are in the pipe
    lat = json.loads(out)
    result = {"options": vars(a), "hub_cycle_ms": stats(cycles),
              **{k: stats(v) for k, v in lat.items() if v and not k.endswith("_start")}}
    result["note"] = "*_clean: requests during which the control process was not stalled"
    stalls = [json.loads(line) for line in stall_proc.communicate()[0].splitlines() if line]
    for name in ("green", "native"):
        clean = [ms for t0, ms in zip(lat[name + "_start"], lat[name])
                 if not any(s0 < t0 + ms / 1e3 and t0 < s0 + late for s0, late in stalls)]
        result[name + "_clean"] = stats(clean) if clean else None
    result["control_stalls"] = {"n": len(stalls),
                                "max_ms": round(max((x[1] for x in stalls), default=0) * 1e3, 1)}
    print(json.dumps(result, indent=1))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({**result, "raw": lat}, fh)
    return 0


if __name__ == "__main__":  # patched here only: the unit tier imports this module
    eventlet.monkey_patch()  # as ryu-manager (hub.patch(thread=True)): threading is green too
    sys.exit(main())
