"""Max-min fair rates of flows on fixed paths, by progressive filling (paper.md section 4.2).

Repeatedly find the link with the smallest fair share of its residual capacity among its
unfrozen flows, freeze those flows at that share, and subtract. Shares within a relative 1e-9
count as equal. Every round freezes at least one flow, so there are at most as many rounds as
flows. Vectorised with a sparse flow-by-link incidence matrix; ``weighted_max_min`` is the
same filling with a weight per (entity, link), which ``model.iteration`` uses (a ring moves
as one entity, a split flow's part puts its share on its links).

A prediction runs one filling per event (an 8,404-flow all-to-all: 604 fillings of about 300
rounds), and each interpreted round pays three sparse products: 25 s. ``rates_kernel`` is the
same filling compiled (numba), bit for bit, ten times faster, but loading it costs about 1 s
per process: a process switches to it once its interpreted fillings have cost that much
(``COMPILE_AFTER_S``, the ski-rental rule: never more than twice the better choice's time),
so the small problems of a CLI call or a test never load it.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # scipy where it is used: the controller's start loads no scipy (issue 74)
    from scipy.sparse import csr_matrix

REL_TOL = 1e-9
COMPILE_AFTER_S = 1.0  # CPU seconds of interpreted filling before loading the compiled one
LOG = logging.getLogger(__name__)


def incidence(paths: list[list[int]], n_links: int) -> csr_matrix:
    from scipy.sparse import csr_matrix

    lengths = np.fromiter((len(p) for p in paths), dtype=np.int64, count=len(paths))
    rows = np.repeat(np.arange(len(paths)), lengths)
    cols = np.fromiter((l for p in paths for l in p), dtype=np.int64, count=int(lengths.sum()))
    return csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(paths), n_links))


def max_min_rates(paths: list[list[int]], capacity: np.ndarray) -> np.ndarray:
    """Rate per flow (same unit as ``capacity``, one entry per link id).

    O(rounds x (flows + links + path lengths)), rounds <= flows. Every path needs a link: a
    flow on no link has no fair share.

    >>> max_min_rates([[0], [0, 1], [1], [1]], np.array([1.0, 3.0]))
    array([0.5 , 0.5 , 1.25, 1.25])
    """
    n = len(paths)
    rates = np.zeros(n)
    if n == 0:
        return rates
    empty = next((k for k, p in enumerate(paths) if not len(p)), None)
    if empty is not None:
        raise ValueError(f"flow {empty} crosses no link")
    a = incidence(paths, len(capacity))
    return weighted_max_min(a, a.T.tocsr(), capacity, np.ones(n, dtype=bool))


class _Filling:
    """Which filling this process runs: interpreted until it has cost ``COMPILE_AFTER_S``,
    then the compiled one (None: not loaded yet; False: numba is missing)."""
    spent = 0.0
    kernel = None
    load_s = 0.0  # CPU seconds loading it took (a budget leaves them out: ``load_seconds``)


def weighted_max_min(a: csr_matrix, at: csr_matrix, capacity: np.ndarray,
                     alive: np.ndarray) -> np.ndarray:
    """Max-min fair rate per row of ``a`` (entities x links, weights) among the ``alive`` rows:
    every unfrozen entity rises at the same pace; a link saturates when sum(weight x rate)
    reaches its capacity, freezing every entity on it. ``at`` is ``a.T.tocsr()``."""
    if _Filling.kernel is None and _Filling.spent >= COMPILE_AFTER_S:
        t = time.process_time()
        _Filling.kernel = _load_kernel()
        _Filling.load_s += time.process_time() - t
    if _Filling.kernel and a.dtype == np.float64 and at.dtype == np.float64:
        return _Filling.kernel(at.indptr, at.indices, at.data, a.indptr, a.indices,
                               np.asarray(capacity, dtype=np.float64),
                               np.asarray(alive, dtype=np.bool_))
    t = time.process_time()
    try:
        return interpreted_max_min(a, at, capacity, alive)
    finally:
        _Filling.spent += time.process_time() - t


def load_seconds() -> float:
    """CPU seconds this process spent loading the compiled filling (once): a time budget
    that extrapolates from one prediction's cost leaves them out."""
    return _Filling.load_s


def _load_kernel():
    """``rates_kernel.fill``, loaded (numba's cache read, or the code compiled) by a first
    call on one link; False where it cannot be (said once): numba not installed (a
    platform without its wheels), or no writable place for its cache (numba raises
    RuntimeError; ``NUMBA_CACHE_DIR`` names one)."""
    try:
        from scipy.sparse import csr_matrix

        from controller.model.rates_kernel import fill
        one = csr_matrix(np.ones((1, 1)))
        fill(one.indptr, one.indices, one.data, one.indptr, one.indices, np.ones(1),
             np.ones(1, dtype=np.bool_))
    except (ImportError, RuntimeError, OSError) as e:
        LOG.warning("rates: the compiled filling is not available (%s): interpreted only", e)
        return False
    return fill


def interpreted_max_min(a: csr_matrix, at: csr_matrix, capacity: np.ndarray,
                        alive: np.ndarray) -> np.ndarray:
    """``weighted_max_min`` in numpy: O(rounds x (entities + links + nnz))."""
    n = a.shape[0]
    rates = np.zeros(n)
    residual = np.asarray(capacity, dtype=float).copy()
    unfrozen = alive.copy()
    times_a, times_at = _product(a), _product(at)
    for _ in range(n):
        if not unfrozen.any():
            break
        demand = times_at(unfrozen.astype(float))
        active = demand > 0
        share = np.full(len(residual), np.inf)
        share[active] = np.maximum(residual[active], 0.0) / demand[active]
        x = share.min()
        bottleneck = share <= x * (1 + REL_TOL) + 1e-300
        newly = (times_a(bottleneck.astype(float)) > 0) & unfrozen
        rates[newly] = x
        unfrozen &= ~newly
        residual -= times_at(np.where(newly, x, 0.0))
    return rates


def _product(m):
    """``lambda v: m @ v`` for float vectors: for a float CSR matrix the kernel that ``@``
    runs (the same sums in the same order), called without its dispatch."""
    try:
        from scipy.sparse import _sparsetools
        kernel = _sparsetools.csr_matvec
    except (ImportError, AttributeError):  # another scipy: the operator
        kernel = None
    if (kernel is None or getattr(m, "format", None) != "csr" or m.dtype != np.float64
            or m.ndim != 2):
        return m.__matmul__
    rows, cols = m.shape
    indptr, indices, data = m.indptr, m.indices, m.data

    def times(v: np.ndarray) -> np.ndarray:
        out = np.zeros(rows)
        kernel(rows, cols, indptr, indices, data, v, out)
        return out
    return times
