"""Distribution summaries in the one shape every report uses (mean, median, percentiles)."""
from __future__ import annotations

import numpy as np

PERCENTILES = (25, 50, 75, 90, 95, 99)


def summarize(values) -> dict:
    v = np.asarray(list(values), dtype=float)
    if v.size == 0:
        return {"count": 0}
    out = {"count": int(v.size), "mean": float(v.mean()), "min": float(v.min()),
           "max": float(v.max())}
    for p, x in zip(PERCENTILES, np.percentile(v, PERCENTILES)):
        out["median" if p == 50 else f"p{p}"] = float(x)
    return out
