"""The agents benchmark's client (benchmarks.agents): one request per connection as the
agents' client sends it, its answer read in the event loop's callbacks, with the time it was
read (what the figures count from), whether it comes in one piece or many, with or without
a body."""
import asyncio
import time

from benchmarks import agents


def _serve(answers: list[list[bytes]], seen: list[bytes]):
    async def handle(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head)
        for piece in answers.pop(0):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.close()
    return handle


def test_the_client_reads_answers_in_pieces_and_stamps_when_it_had_them(monkeypatch):
    body = b'{"version": "v1"}\n'
    answers = [[b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Len",
                b"gth: %d\r\n\r\n%s" % (len(body), body[:5]), body[5:]],
               [b'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\n\r\n']]
    seen: list[bytes] = []

    async def main():
        server = await asyncio.start_server(_serve(answers, seen), "127.0.0.1", 0)
        monkeypatch.setattr(agents, "REST_PORT", server.sockets[0].getsockname()[1])
        try:
            t = time.monotonic()
            first = await agents._exchange("GET", "/v1/hosts/h0/segments", timeout=10)
            second = await agents._exchange("GET", "/v1/hosts/h0/segments", timeout=10,
                                            headers={"If-None-Match": '"v1"'})
            return t, first, second
        finally:
            server.close()

    t, (status, fields, data, at), second = asyncio.run(main())
    assert (status, data) == (200, body) and fields["content-type"] == "application/json"
    assert at - t >= 0.09  # read once its last piece came (two pauses of 50 ms before it)
    assert second[:3] == (304, {"etag": '"v1"'}, b"")
    assert seen[0].startswith(b"GET /v1/hosts/h0/segments HTTP/1.1\r\n")
    assert b"connection" not in seen[0].lower()  # kept alive, as controller.client asks
    assert b'If-None-Match: "v1"' in seen[1]


def test_the_agents_first_watches_spread_their_waits_so_renewals_spread(monkeypatch):
    """Each simulated agent's first watch waits its share of ``WAIT_S`` (host i of n:
    (i + 1) / n of it), later ones ``WAIT_S``: renewals come spread, as from a fleet that
    did not start in one second, not 8,192 at once."""
    import json
    heads: list[bytes] = []
    doc = json.dumps({"version": "v1", "flows": [], "probes": []}).encode()

    async def handle(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        heads.append(head)
        if b"If-None-Match" not in head:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(doc), doc))
            await writer.drain()
        else:
            await asyncio.sleep(30)  # held: the watch is parked
        writer.close()

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        monkeypatch.setattr(agents, "REST_PORT", server.sockets[0].getsockname()[1])
        fleet = agents.Agents(["h0", "h1", "h2", "h3"])
        try:
            fleet.start()
            deadline = time.monotonic() + 10
            while sum(b"If-None-Match" in h for h in heads) < 4:
                assert time.monotonic() < deadline, heads
                await asyncio.sleep(0.01)
        finally:
            await fleet.stop()
            server.close()
        return fleet

    fleet = asyncio.run(main())
    waits = {h.split(b" ")[1].decode(): h.split(b"Prefer: wait=")[1].split(b"\r\n")[0]
             for h in heads if b"If-None-Match" in h}
    w = agents.WAIT_S
    assert waits == {f"/v1/hosts/h{i}/segments": f"{w * (i + 1) / 4:.2f}".encode()
                     for i in range(4)}
    assert all(v == "v1" for v in fleet.version.values()) and not fleet.errors
