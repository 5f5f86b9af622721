"""The emulation's summary picture (matplotlib, headless)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def emulation_plot(summary: dict, path: str) -> str:
    """Measured All-Reduce time against ideal and prediction per routing, and the measured
    bytes on every leaf-to-spine link, sorted (flat = balanced)."""
    rounds = summary["rounds"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    labels, measured, ideal, predicted = [], [], [], []
    for r in rounds:
        for jid, j in r["jobs"].items():
            labels.append(f"{r['algorithm']}\n{jid}")
            measured.append(float(np.mean(j["allreduce_s"])))
            ideal.append(j["ideal_s"])
            predicted.append(j["predicted_s"])
    x = np.arange(len(labels))
    ax1.bar(x - 0.27, measured, 0.27, label="measured")
    ax1.bar(x, predicted, 0.27, label="fluid model")
    ax1.bar(x + 0.27, ideal, 0.27, label="ideal (shaped line rate)")
    ax1.set_xticks(x, labels, fontsize=8)
    ax1.set_ylabel("All-Reduce time per iteration (s)")
    ax1.legend(fontsize=8)
    ax1.grid(axis="y", alpha=0.3)
    for r in rounds:
        ups = sorted((b for k, b in r["link_bytes"].items() if k.startswith("l")), reverse=True)
        ax2.plot(np.arange(len(ups)), np.asarray(ups) / 1e6, marker=".", label=r["algorithm"])
    ax2.set_xlabel("leaf-to-spine links, sorted by bytes")
    ax2.set_ylabel("measured MB per round (port counters)")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fattree_plot(summary: dict, path: str) -> str:
    """The three-tier demo (``fattree_rings.compare_rings``): one step of both rings under the
    emulation's ECMP (both hashings) and under the plan, against the predictions; and the
    bytes every directed aggregation-core link carried in one step of each, in flows' worth
    (1 everywhere = balanced)."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    steps, hashings = summary["step_s"], list(summary["predicted_ecmp_s"])
    labels = [f"ECMP\n({h})" for h in hashings] + [f"mlroute\n({summary['mode']} mode)"]
    measured = [float(np.median(steps[f"ecmp_{h}"])) for h in hashings] + [
        float(np.median(steps["planned"]))]
    predicted = [summary["predicted_ecmp_s"][h] for h in hashings] + [
        summary["predicted_planned_s"]]
    x = np.arange(len(labels))
    ax1.bar(x - 0.2, measured, 0.4, label=f"measured (median of {summary['runs']})")
    ax1.bar(x + 0.2, predicted, 0.4, label="predicted (planners' model of each)")
    ax1.set_xticks(x, labels)
    ax1.set_ylabel("seconds per step (both rings)")
    ax1.set_ylim(top=1.3 * max(measured + predicted))
    ax1.legend(fontsize=8)
    ax1.grid(axis="y", alpha=0.3)
    links, flow = summary["link_bytes"], summary["bytes_per_flow"]
    for key, name in [(f"ecmp_{h}", f"ECMP ({h})") for h in hashings] + [("planned", "mlroute")]:
        got = sorted((v[key] / flow for v in links.values() if v["tier"] == "core"),
                     reverse=True)
        ax2.plot(got, marker=".", label=name)
    ax2.set_ylim(bottom=0)
    ax2.set_xlabel("directed aggregation-core links, sorted by bytes")
    ax2.set_ylabel("flows' worth of bytes in one step (port counters)")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    fig.suptitle(f"k = 4 fat-tree, {summary['flows']} flows across pods, "
                 f"{summary['bw_mbps']:g} Mbit/s links", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
