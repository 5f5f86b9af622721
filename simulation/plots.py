"""Plots of the paper grid (matplotlib, headless): All-Reduce slowdown CDF, slowdown against the
number of jobs and against failed spines, and planner runtime CDF; and of the realistic grid:
slowdown CDF, worst job per cell against the two bounds, slowdown by failure pattern and by
utilisation.

Slowdown = measured All-Reduce time / ideal (line rate, no sharing), so models of different size
share one axis. As the paper's analysis does, iteration 0 of every job is left out.
"""
from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

LABELS = {"ecmp": "ECMP", "edge-coloring": "Edge colouring", "annealing": "Sim. annealing",
          "ilp": "ILP", "greedy": "Greedy (paper)", "split": "Split (Ethereal-like)",
          "auto": "Auto (proven unsplit)", "auto-jobs": "Auto, objective jobs",
          "equitable": "Equitable colouring", "split-unbounded": "Split, any parts",
          "spray": "Spray (LP bound, penalty)"}

FIRST_ITERATION = 1


def unsplit_floor(r: dict) -> float:
    """The unsplit optimum when proven, else the ILP's best bound (a valid floor either way)."""
    u = r["bounds"]["unsplit"]
    return u["best"] if u["proven"] else u["bound"]


# distinct dashes and widths so that algorithms with identical results stay visible
STYLES = {"ecmp": ("-", 2.0), "edge-coloring": ("-", 4.5), "annealing": ("-", 2.0),
          "ilp": ("--", 3.0), "greedy": (":", 2.2), "split": ("-", 2.0), "auto": ("-.", 2.2)}
MARKERS = {"ecmp": "x", "edge-coloring": "s", "annealing": "^", "ilp": "D", "greedy": "o",
           "split": "*", "auto": "P"}


def _label(alg: str) -> str:
    return LABELS.get(alg, alg)


def _style(alg: str) -> dict:
    dash, width = STYLES.get(alg, ("-", 2.0))
    return {"linestyle": dash, "linewidth": width, "label": _label(alg)}


def _legend(ax):
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, fontsize=8, frameon=False)


def _slowdowns(results, alg, **cell):
    out = []
    for r in results:
        if r["algorithm"] != alg or any(r["cell"][k] != v for k, v in cell.items()):
            continue
        for j in r["jobs"].values():
            out += [t / j["ideal_s"] for t in j["allreduce_s"][FIRST_ITERATION:]]
    return out


def _cdf(ax, values, alg):
    v = np.sort(values)
    ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", **_style(alg))


def paper_plots(results: list[dict], out: str) -> list[str]:
    algorithms = list(dict.fromkeys(r["algorithm"] for r in results))
    files = []

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for alg in algorithms:
        _cdf(ax, _slowdowns(results, alg), alg)
    ax.set_title("All-Reduce time, whole grid")
    files.append(_finish(fig, ax, "All-Reduce time / ideal", "CDF over (job, iteration)", out,
                         "paper_allreduce_cdf.png"))

    for key, xlabel, name in (("jobs", "concurrent jobs", "paper_allreduce_vs_jobs.png"),
                              ("failed", "failed spines (of 32)", "paper_allreduce_vs_failures.png")):
        xs = sorted({r["cell"][key] for r in results})
        fig, ax = plt.subplots(figsize=(6.4, 4.6))
        for alg in algorithms:
            ys = [np.mean(_slowdowns(results, alg, **{key: x}) or [np.nan]) for x in xs]
            ax.plot(xs, ys, marker="o", **_style(alg))
        ax.set_xticks(xs)
        files.append(_finish(fig, ax, xlabel, "mean All-Reduce time / ideal", out, name))

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for alg in algorithms:
        ms = [m for r in results if r["algorithm"] == alg for m in r["planner_ms"]]
        if ms:
            _cdf(ax, ms, alg)
    ax.set_xscale("log")
    files.append(_finish(fig, ax, "planner runtime per call (ms, log)", "CDF over planner calls",
                         out, "paper_planner_runtime_cdf.png"))
    return files


def realistic_plots(results: list[dict], out: str) -> list[str]:
    """The realistic grid (``simulation.paper.run_realistic_cell`` results)."""
    algorithms = list(results[0]["algorithms"]) if results else []
    files = []

    def slowdowns(alg, keep=lambda r: True):
        return [j["slowdown"] for r in results if keep(r)
                for j in r["algorithms"][alg]["jobs"].values()]

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for alg in algorithms:
        _cdf(ax, slowdowns(alg), alg)
    ax.set_title("Realistic placements: All-Reduce time, every job at once")
    files.append(_finish(fig, ax, "All-Reduce time / ideal", "CDF over (cell, job)", out,
                         "realistic_allreduce_cdf.png"))

    # worst job of every cell against the unsplit and fractional optimum of that cell
    fig, ax = plt.subplots(figsize=(11.0, 5.0))
    x = np.arange(len(results))
    for alg in algorithms:
        worst = [max(j["slowdown"] for j in r["algorithms"][alg]["jobs"].values()) for r in results]
        ax.plot(x, worst, linestyle="none", marker=MARKERS.get(alg, "o"), markersize=6,
                fillstyle="none", label=_label(alg))
    floors = [unsplit_floor(r) for r in results]
    ax.step(x, floors, where="mid", color="black", linewidth=1.5, label="unsplit optimum (ILP)")
    unproven = [i for i, r in enumerate(results) if not r["bounds"]["unsplit"]["proven"]]
    if unproven:
        ax.plot(unproven, [floors[i] for i in unproven], "kx", markersize=10,
                label="ILP not proven (best bound)")
    ax.step(x, [r["bounds"]["fractional"]["value"] for r in results], where="mid", color="grey",
            linewidth=1.5, linestyle="--", label="fractional optimum (LP)")
    ax.set_xticks(x, [f"{r['cell']['failures']}\n{r['cell']['utilisation']:.0%} s{r['cell']['seed']}"
                      for r in results], fontsize=6, rotation=90)
    _log_y(ax)
    ax.set_title("Worst job per cell against the two bounds")
    files.append(_finish(fig, ax, "cell (failures, utilisation, seed)",
                         "worst All-Reduce time / ideal (log)", out, "realistic_cells.png",
                         legend_right=True))

    for key, xlabel, name in (("failures", "failure pattern", "realistic_vs_failures.png"),
                              ("utilisation", "server utilisation", "realistic_vs_utilisation.png")):
        xs = list(dict.fromkeys(r["cell"][key] for r in results))
        if key == "utilisation":
            xs.sort()
        fig, ax = plt.subplots(figsize=(6.4, 4.6))
        pos = np.arange(len(xs))
        for alg in algorithms:
            ys = [np.mean(slowdowns(alg, lambda r, v=v: r["cell"][key] == v) or [np.nan])
                  for v in xs]
            ax.plot(pos, ys, marker=MARKERS.get(alg, "o"), **_style(alg))
        for label, value, style in (
                ("unsplit optimum (ILP)", unsplit_floor, {"color": "black"}),
                ("fractional optimum (LP)", lambda r: r["bounds"]["fractional"]["value"],
                 {"color": "grey", "linestyle": "--"})):
            ys = [np.mean([value(r) for r in results if r["cell"][key] == v]) for v in xs]
            ax.plot(pos, ys, linewidth=1.2, label=label, **style)
        ax.set_xticks(pos, [f"{v:.0%}" if key == "utilisation" else v for v in xs])
        _log_y(ax)
        files.append(_finish(fig, ax, xlabel, "mean All-Reduce time / ideal (log)", out, name))
    return files


def _log_y(ax):
    """Log y axis with plain tick labels (slowdowns 1 to about 6)."""
    from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(FixedLocator([1, 1.1, 1.25, 1.5, 2, 3, 4, 6, 8]))
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())


def _finish(fig, ax, xlabel: str, ylabel: str, out: str, name: str,
            legend_right: bool = False) -> str:
    """Label, grid and legend one grid plot (below it, or right of it), then save it."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if legend_right:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    else:
        _legend(ax)
    return _save(fig, out, name)


def _save(fig, out: str, name: str) -> str:
    path = os.path.join(out, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
