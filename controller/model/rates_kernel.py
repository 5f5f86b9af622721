"""``rates.weighted_max_min``'s progressive filling, compiled (numba): the same rounds, the
same sums in the same order, so the same rates to the last bit, at about a tenth of the time
on large problems (``python -m benchmarks.jobs_search``).

The interpreted filling pays three sparse products per round whatever froze; here a round
costs a scan of the links with demand left plus the rows of the links its frozen entities
cross: O(rounds x live links + frozen entities x their links x those links' rows). Loading
numba and the cached machine code costs about 1 s per process, which ``rates`` pays only
once the interpreted filling has cost as much (see ``rates.COMPILE_AFTER_S``).

>>> import numpy as np
>>> from scipy.sparse import csr_matrix
>>> a = csr_matrix(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 1.0]]))
>>> at = a.T.tocsr()
>>> fill(at.indptr, at.indices, at.data, a.indptr, a.indices, np.array([1.0, 3.0]),
...      np.ones(4, dtype=bool))
array([0.5 , 0.5 , 1.25, 1.25])
"""
from __future__ import annotations

import numpy as np
from numba import njit

REL_TOL = 1e-9  # rates.REL_TOL, copied: importing rates here would be an import cycle (a
# test holds the two equal)


@njit(cache=True, nogil=True)
def fill(t_ptr, t_idx, t_data, a_ptr, a_idx, capacity, alive):  # pragma: no cover (compiled)
    """Rates per entity: ``t_*`` the links x entities CSR of weights, ``a_*`` its transpose's
    structure (entity -> links), ``capacity`` per link, ``alive`` the entities that run."""
    n, links = alive.shape[0], capacity.shape[0]
    rates = np.zeros(n)
    residual = capacity.copy()
    unfrozen = alive.copy()
    left = 0
    for e in range(n):
        left += unfrozen[e]
    share = np.full(links, np.inf)
    live = np.empty(links, dtype=np.int64)  # the links with demand left, in any order
    where = np.full(links, -1, dtype=np.int64)  # a link's place in ``live``
    nl = 0
    for k in range(links):
        d = 0.0
        for jj in range(t_ptr[k], t_ptr[k + 1]):
            if unfrozen[t_idx[jj]]:
                d += t_data[jj]
        if d > 0:
            share[k] = max(residual[k], 0.0) / d
            live[nl] = k
            where[k] = nl
            nl += 1
    newly = np.zeros(n, dtype=np.bool_)
    frozen = np.empty(n, dtype=np.int64)
    touched = np.zeros(links, dtype=np.bool_)
    crossed = np.empty(links, dtype=np.int64)
    while left > 0:
        x = np.inf
        for k in range(nl):
            if share[live[k]] < x:
                x = share[live[k]]
        if x == np.inf:
            break
        limit = x * (1 + REL_TOL) + 1e-300
        nf = 0
        for k in range(nl):  # every unfrozen entity on a bottleneck link freezes at x
            link = live[k]
            if share[link] <= limit:
                for jj in range(t_ptr[link], t_ptr[link + 1]):
                    e = t_idx[jj]
                    if t_data[jj] > 0 and unfrozen[e] and not newly[e]:
                        newly[e] = True
                        frozen[nf] = e
                        nf += 1
        if nf == 0:
            break
        nt = 0
        for k in range(nf):
            e = frozen[k]
            rates[e] = x
            unfrozen[e] = False
            for jj in range(a_ptr[e], a_ptr[e + 1]):
                link = a_idx[jj]
                if not touched[link]:
                    touched[link] = True
                    crossed[nt] = link
                    nt += 1
        left -= nf
        for k in range(nt):  # the links they cross: demand and residual as the products sum
            link = crossed[k]
            d, used = 0.0, 0.0
            for jj in range(t_ptr[link], t_ptr[link + 1]):
                e = t_idx[jj]
                if unfrozen[e]:
                    d += t_data[jj]
                elif newly[e]:
                    used += t_data[jj] * x
            residual[link] -= used
            touched[link] = False
            if d > 0:
                share[link] = max(residual[link], 0.0) / d
            elif where[link] >= 0:  # no demand left: out of the scans
                share[link] = np.inf
                nl -= 1
                last = live[nl]
                live[where[link]] = last
                where[last] = where[link]
                where[link] = -1
        for k in range(nf):
            newly[frozen[k]] = False
    return rates
