"""Declare a PyTorch distributed job to mlroute from the training script itself.

    import torch.distributed as dist
    from controller.integrations.pytorch import declare_job
    dist.init_process_group("gloo")                       # env:// (torchrun)
    mlroute_job = declare_job("http://ctl:8080", bytes_hint=4 << 20)
    ...                                                   # training
    dist.destroy_process_group()                          # the job is removed here (or at exit)

Every rank calls ``declare_job`` (it is collective): each gathers its IPv4 address over the
process group, rank 0 of the group posts the job and the job is deleted once, by rank 0, when
the group is destroyed (``torch.distributed.destroy_process_group`` is wrapped), when the
returned handle's ``with`` block ends or ``remove()`` is called, at interpreter exit (atexit) or
on SIGTERM when the script left SIGTERM's default action. It never raises into the training
script: an unreachable controller or a refused job is a warning on the ``mlroute`` logger.

What each backend sends where (``declare="auto"``):

* gloo, CPU tensors: ``gloo::allreduce`` (gloo/allreduce.cc, used by ProcessGroupGloo for
  dense CPU all-reduce) is a ring in which rank r sends its segments to rank r - 1 and receives
  from r + 1. The job is declared as a ``ring_allreduce`` whose ranks are the hosts in reversed
  rank order, so the planned flows carry the data (declared in rank order they carry only the
  acknowledgements: issue 14 measured All-Reduce 1.5x slower than with no job at all).
* NCCL: its rings follow its own topology search, several channels with their own orders,
  several connections per pair, trees for large jobs (NCCL_ALGO): nothing a script can know
  before NCCL builds its communicator. The job is declared by its members only and the
  controller learns the matrix from the traffic.
* mpi (Open MPI): the tuned ring sends to rank + 1 but the algorithm depends on the message
  size; members only unless ``declare="ring"``.

Several ranks on one host count once; a ring that visits a host twice (ranks interleaved over
hosts) is declared as its distinct host pairs (explicit flows). ``declare="members"`` always
declares members only, ``"ring"`` forces the backend's ring (gloo: r -> r - 1, mpi: r -> r + 1).

A rank's address: $MLROUTE_ADDRESS if set, else the interface the backend binds
(GLOO_SOCKET_IFNAME, exact names; NCCL_SOCKET_IFNAME, prefixes, ``=`` exact, ``^`` excluded),
else for gloo the host name's address when it is a local, non-loopback one (what gloo binds
then), else the source address of the route to MASTER_ADDR, else the host name's address.
NCCL over InfiniBand or RoCE sends from the HCA's address (NCCL_IB_HCA), not a socket
interface: set MLROUTE_ADDRESS to it. The training hosts must reach the controller's REST
address (``--wsapi-host``).

torch is imported lazily: this module imports only the standard library and controller.client.
"""
from __future__ import annotations

import atexit
import fcntl
import logging
import os
import signal
import socket
import struct
import threading

from controller.client import Client, ControllerError, members_job, read_token

LOG = logging.getLogger("mlroute")
RING_STEP = {"gloo": -1, "mpi": +1}  # where rank r sends its data in the backend's ring
DEFAULT_RING_BYTES = 1 << 20  # a ring declaration needs a size; only predictions use it
MAX_ID = 64


def interface_ipv4(name: str) -> str | None:
    """The IPv4 address of interface ``name`` (Linux SIOCGIFADDR), None if it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            res = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))
        except OSError:
            return None
    return socket.inet_ntoa(res[20:24])


def pick_interface(spec: str, names: list[str], prefix: bool) -> list[str]:
    """The interfaces a *_SOCKET_IFNAME value selects, in order: comma-separated names
    (``prefix``: NCCL's prefix match, ``=name`` exact, a leading ``^`` excludes)."""
    spec = spec.strip()
    exclude = spec.startswith("^")
    items = [x.strip() for x in spec.lstrip("^").split(",") if x.strip()]
    exact = not prefix
    if items and items[0].startswith("="):
        exact, items[0] = True, items[0][1:]

    def hit(name):
        return any(name == i if exact else name.startswith(i) for i in items)
    if exclude:
        return [n for n in names if not hit(n) and n != "lo"]
    if exact:
        return [i for i in items if i in names]
    return [n for i in items for n in names if n.startswith(i)]


def hostname_address(hostname: str) -> str | None:
    """The first IPv4 address ``hostname`` resolves to that this host can bind, as gloo's
    default device picks it (torch's createDefaultDevice); None if none does."""
    try:
        infos = socket.getaddrinfo(hostname, None, socket.AF_INET, socket.SOCK_STREAM)
    except OSError:
        return None
    for *_, sockaddr in infos:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((sockaddr[0], 0))
            except OSError:
                continue
            return sockaddr[0]
    return None


def rank_address(backend: str, env=None, hostname: str | None = None) -> str:
    """This process's IPv4 address as the backend uses it (see the module's docstring)."""
    env = os.environ if env is None else env
    hostname = hostname or socket.gethostname()
    if env.get("MLROUTE_ADDRESS"):
        return env["MLROUTE_ADDRESS"]
    var = {"gloo": "GLOO_SOCKET_IFNAME", "nccl": "NCCL_SOCKET_IFNAME"}.get(backend)
    if var and env.get(var):
        names = [n for _, n in socket.if_nameindex()]
        for name in pick_interface(env[var], names, prefix=backend == "nccl"):
            addr = interface_ipv4(name)
            if addr:
                return addr
    if backend == "gloo":  # gloo binds the host name's address (a loopback one is useless)
        addr = hostname_address(hostname)
        if addr and not addr.startswith("127."):
            return addr
    master = env.get("MASTER_ADDR")
    if master:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((socket.gethostbyname(master), int(env.get("MASTER_PORT") or 9)))
                return s.getsockname()[0]
        except (OSError, ValueError):
            pass
    return socket.gethostbyname(hostname)


def job_document(job_id: str, addresses: list[str], backend: str, declare: str = "auto",
                 bytes_hint: float | None = None, **options) -> dict | None:
    """The job to post for ranks at ``addresses`` (index = group rank); None when every rank
    is on one host (no traffic crosses the fabric)."""
    hosts = list(dict.fromkeys(addresses))
    if len(hosts) < 2:
        return None
    step = RING_STEP.get(backend)
    ring = declare == "ring" or (declare == "auto" and backend == "gloo")
    if declare not in ("auto", "ring", "members"):
        raise ValueError(f"declare must be auto, ring or members, not {declare!r}")
    if not ring or step is None:
        if declare == "ring":
            LOG.warning("mlroute: backend %s has no known ring direction: declaring members "
                        "only", backend)
        return members_job(job_id, hosts, bytes_hint, **options)
    n = len(addresses)
    order = [addresses[(r * step) % n] for r in range(n)]  # order[i] sends to order[i + 1]
    seq = [a for i, a in enumerate(order) if a != order[i - 1]]
    start = seq.index(order[0])  # rank 0's host first
    seq = seq[start:] + seq[:start]
    size = bytes_hint or DEFAULT_RING_BYTES
    options = {k: v for k, v in options.items() if v is not None}
    if len(seq) == len(set(seq)):
        return {"id": job_id, "collective": "ring_allreduce", "ranks": seq, "bytes": size,
                **options}
    pairs = dict.fromkeys((a, b) for a, b in zip(seq, seq[1:] + seq[:1]))
    return {"id": job_id, "flows": [{"src": a, "dst": b, "bytes": size} for a, b in pairs],
            **options}


def default_job_id(env=None) -> str:
    env = os.environ if env is None else env
    for var in ("MLROUTE_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        v = env.get(var)
        if v and v != "none":
            return f"torch-{v}"[:MAX_ID] if var != "MLROUTE_JOB_ID" else v[:MAX_ID]
    return f"torch-{socket.gethostname()}-{os.getpid()}"[:MAX_ID]


class MlrouteJob:
    """The declared job of one rank: ``declared`` on the rank that posted it. ``remove()``
    deletes it once (later calls, other ranks: nothing); also a context manager."""

    def __init__(self, job_id: str | None, client: Client | None, group=None,
                 declared: bool = False, document: dict | None = None):
        self.job_id, self.client, self.group = job_id, client, group
        self.declared, self.document = declared, document
        self.removed = False
        self._lock = threading.Lock()

    def remove(self) -> bool:
        """Delete the job (rank 0, once); True if this call deleted it. Never raises."""
        with self._lock:
            if not self.declared or self.removed:
                return False
            self.removed = True
        _ACTIVE.discard(self)
        try:
            self.client.delete_job(self.job_id)
            return True
        except ControllerError as e:
            LOG.warning("mlroute: could not remove job %s: %s", self.job_id, e)
        except Exception as e:  # noqa: BLE001 - never into the training script
            LOG.warning("mlroute: could not remove job %s: %s", self.job_id, e)
        return False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


_ACTIVE: set = set()
_PATCH_LOCK = threading.Lock()
_patched = False


def _remove_all() -> None:
    for job in list(_ACTIVE):
        job.remove()


def _patch_destroy(dist) -> None:
    """Wrap torch.distributed.destroy_process_group once: removing a group removes the jobs
    declared on it (no argument: the default group, i.e. every job)."""
    global _patched
    with _PATCH_LOCK:
        if _patched:
            return
        original = dist.destroy_process_group

        def destroy_process_group(group=None):
            try:
                return original(group)
            finally:
                for job in list(_ACTIVE):
                    if group is None or job.group is group:
                        job.remove()
        destroy_process_group.__wrapped__ = original
        dist.destroy_process_group = destroy_process_group
        atexit.register(_remove_all)
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
            def on_term(signum, frame):
                _remove_all()
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
            signal.signal(signal.SIGTERM, on_term)
        _patched = True


def declare_job(url: str | None = None, job_id: str | None = None, group=None,
                bytes_hint: float | None = None, *, declare: str = "auto",
                token: str | None = None, token_file: str | None = None,
                learn: bool | None = None, algorithm: str | None = None,
                mode: str | None = None, timeout: float = 10.0) -> MlrouteJob:
    """Collective: every rank of ``group`` (default: the default group) calls it after
    ``init_process_group``. Rank 0 posts the job to ``url`` (rank 0's; $MLROUTE_URL when
    None; no URL: nothing is declared); every rank returns once rank 0 is done, with its
    ``MlrouteJob`` (``document``: what was declared, None if nothing). Never raises."""
    import torch.distributed as dist
    url = url or os.environ.get("MLROUTE_URL")
    try:
        backend = str(dist.get_backend(group)).lower()
        rank = dist.get_rank(group)
    except Exception as e:  # noqa: BLE001
        LOG.warning("mlroute: no process group (%s): call declare_job after "
                    "init_process_group; nothing declared", e)
        return MlrouteJob(job_id, None, group)
    try:
        mine = rank_address(backend)
    except OSError as e:
        LOG.warning("mlroute: rank %d: no IPv4 address found (%s)", rank, e)
        mine = None
    proposal = job_id or default_job_id()
    gathered = [None] * dist.get_world_size(group)
    try:
        dist.all_gather_object(gathered, (mine, proposal), group=group)
    except Exception as e:  # noqa: BLE001
        LOG.warning("mlroute: gathering the ranks' addresses failed (%s); nothing declared", e)
        return MlrouteJob(job_id, None, group)
    handle = MlrouteJob(gathered[0][1], None, group)
    if rank == 0:
        _post(handle, dist, url, [a for a, _ in gathered], backend, declare, bytes_hint,
              token, token_file, timeout, learn=learn, algorithm=algorithm, mode=mode)
    # every rank returns once rank 0 is done: traffic starts on the planned paths
    posted = [None] * len(gathered)
    try:
        dist.all_gather_object(posted, handle.document if handle.declared else None,
                               group=group)
    except Exception as e:  # noqa: BLE001
        LOG.warning("mlroute: waiting for rank 0's declaration failed (%s)", e)
    else:
        handle.document = posted[0]
    return handle


def _post(handle: MlrouteJob, dist, url, addresses, backend, declare, bytes_hint, token,
          token_file, timeout, **options) -> None:
    """Rank 0: post the job; a warning instead of any exception."""
    jid = handle.job_id
    if not url:
        LOG.info("mlroute: no controller URL (MLROUTE_URL): job %s not declared", jid)
        return
    if None in addresses:
        LOG.warning("mlroute: rank %d has no address; job %s not declared",
                    addresses.index(None), jid)
        return
    try:
        client = Client(url, token=read_token(token, token_file), timeout=timeout)
        doc = job_document(jid, addresses, backend, declare, bytes_hint, **options)
        if doc is None:
            LOG.info("mlroute: every rank of job %s is on %s: nothing crosses the fabric, "
                     "not declared", jid, addresses[0])
            return
        client.add_job(doc)
    except Exception as e:  # noqa: BLE001 - unreachable, refused, bad token file: warn only
        LOG.warning("mlroute: job %s not declared: %s", jid, e)
        return
    handle.client, handle.declared, handle.document = client, True, doc
    _ACTIVE.add(handle)
    try:
        _patch_destroy(dist)
    except Exception as e:  # noqa: BLE001
        LOG.warning("mlroute: cannot hook destroy_process_group (%s): the job is removed at "
                    "exit or by remove()", e)
    LOG.info("mlroute: job %s declared (%s)", jid, "ring" if "ranks" in doc else
             "flows" if "flows" in doc else "members")
