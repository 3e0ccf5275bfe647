"""The figures of a replay report: learning curves with bands, and a forest plot of the
published points over the reproduced intervals (with the diagnosis replays under each
discrepant cell, so the plot shows which knob brings the published value inside)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from audit.analysis.compare import t_interval
from audit.report.sections import ORACLE_MARK

PUBLISHED_COLOR = "#c0392b"
INSIDE_COLOR = "#27ae60"
REPRODUCED_COLOR = "#2c3e50"
HYPOTHESIS_COLOR = "#7f8c8d"
ORACLE_COLOR = "#000000"
LINE_STYLES = ("-", "--", "-.", ":")
LEGEND_ROWS = 24  # entries a learning-curve legend column holds before another column starts


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curve_styles(strategies: list[str], oracles: list[str]) -> dict[str, tuple[str, str]]:
    """A (colour, line style) per curve, no two alike up to 40 strategies: the colour varies
    first, so up to ten strategies are solid tab10 lines. Oracles are black, a colour no
    strategy gets, so they read as the bounds they are."""
    import matplotlib

    colors = [matplotlib.colors.to_hex(c) for c in matplotlib.colormaps["tab10"].colors]
    combos = [(color, style) for style in LINE_STYLES for color in colors]
    styles = {s: combos[i % len(combos)] for i, s in enumerate(strategies)}
    return styles | {s: (ORACLE_COLOR, LINE_STYLES[i % len(LINE_STYLES)]) for i, s in enumerate(oracles)}


def plot_learning_curves(report: dict[str, Any], curves: dict[str, tuple[np.ndarray, np.ndarray]], path: Path) -> None:
    """Mean accuracy per round with its 95% t-band, one style per curve, oracles last and
    marked, the legend beside the axes so it hides no curve."""
    plt = _pyplot()
    is_oracle = {c["strategy"]: bool(c.get("uses_test_labels")) for c in report["strategies"]}
    oracles = [s for s in curves if is_oracle.get(s)]
    styles = curve_styles([s for s in curves if not is_oracle.get(s)], oracles)
    fig, ax = plt.subplots(figsize=(10, 5), dpi=110, layout="constrained")
    for strategy, (color, style) in styles.items():
        n_labeled, acc = curves[strategy]
        marks = ", ".join(["oracle"] * (strategy in oracles) + [f"n={acc.shape[0]}"])
        ax.plot(n_labeled, acc.mean(axis=0), label=f"{strategy} ({marks})", color=color, linestyle=style,
                linewidth=1.8 if strategy in oracles else 1.4)
        if acc.shape[0] > 1:
            lo, hi = np.array([t_interval(acc[:, j], 0.95) for j in range(acc.shape[1])]).T
            ax.fill_between(n_labeled, lo, hi, color=color, alpha=0.12, linewidth=0)
    p = report["protocol"]
    ax.set_xlabel("labeled-set size")
    ax.set_ylabel("test accuracy (mean, 95% band)")
    ax.set_title(f"{p['name']} on {report['dataset']['name']} (AUBC {p['aubc_variant']})")
    ax.grid(alpha=0.3)
    if curves:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
                  ncols=1 + (len(curves) - 1) // LEGEND_ROWS)
    fig.savefig(path)
    plt.close(fig)


def forest_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per replayed cell with an interval (oracles marked), then one per diagnosis
    replay of that cell (labelled with its n when it stopped at an early look, which is why
    its interval is wider)."""
    rows = []
    for c in report["strategies"]:
        if c["status"] != "ok" or c.get("ci95") is None or None in c["ci95"]:
            continue
        rows.append({"label": c["strategy"] + ORACLE_MARK * bool(c.get("uses_test_labels")), "mean": c["mean"],
                     "ci95": c["ci95"], "ci99": c["ci99"], "published": c["published_mean"], "hypothesis": False})
        for h in (c.get("diagnosis") or {}).get("hypotheses", []):
            stopped = f" (n = {h['stopped_at']})" if h.get("stopped_at") else ""
            rows.append({"label": f"~ {h['label']}{stopped}", "mean": h["mean"], "ci95": h["ci95"], "ci99": None,
                         "published": c["published_mean"], "hypothesis": True, "inside": h["inside"]})
    return rows


def forest_legend(rows: list[dict[str, Any]]) -> list[Any]:
    """One legend entry per kind of mark the forest plot draws, and only for those it draws."""
    from matplotlib.lines import Line2D

    entries = [Line2D([], [], marker="o", linestyle="none", color="white", markeredgecolor=REPRODUCED_COLOR,
                      markersize=6, label="reproduced mean"),
               Line2D([], [], color=REPRODUCED_COLOR, linewidth=4, label="95% t-interval"),
               Line2D([], [], color=REPRODUCED_COLOR, linewidth=1.2, label="99% t-interval")]
    if any(r["published"] is not None and not r["hypothesis"] for r in rows):
        entries.append(Line2D([], [], marker="D", linestyle="none", color=PUBLISHED_COLOR, markersize=7,
                              label="published mean"))
    hypotheses = [r for r in rows if r["hypothesis"]]
    if any(not r["inside"] for r in hypotheses):
        entries.append(Line2D([], [], color=HYPOTHESIS_COLOR, linewidth=3, label="diagnosis replay (95%)"))
    if any(r["inside"] for r in hypotheses):
        entries.append(Line2D([], [], color=INSIDE_COLOR, linewidth=3,
                              label="diagnosis replay (95%), published mean inside"))
    return entries


def plot_forest(report: dict[str, Any], path: Path) -> None:
    """Per cell: the reproduced mean with its 95% (thick) and 99% (thin) t-interval and the
    published mean (red diamond); diagnosis replays below it, green when the published value
    falls inside their 95% interval. The legend names every mark."""
    plt = _pyplot()
    rows = forest_rows(report)
    scale = 100 if report["protocol"]["scale"] == "percent" else 1
    longest = max((len(r["label"]) for r in rows), default=0)  # long replay labels widen it, not squeeze the axis
    fig, ax = plt.subplots(figsize=(max(9.0, 7.5 + 0.09 * longest), 1.2 + 0.42 * max(len(rows), 1)), dpi=110,
                           layout="constrained")
    for y, row in enumerate(rows):
        color = (INSIDE_COLOR if row["inside"] else HYPOTHESIS_COLOR) if row["hypothesis"] else REPRODUCED_COLOR
        if row["ci99"]:
            ax.hlines(y, *(scale * np.array(row["ci99"])), color=color, linewidth=1.2)
        ax.hlines(y, *(scale * np.array(row["ci95"])), color=color, linewidth=4 if not row["hypothesis"] else 3)
        ax.plot(scale * row["mean"], y, "o", color="white", markeredgecolor=color, markersize=6, zorder=3)
        if row["published"] is not None and not row["hypothesis"]:
            ax.plot(scale * row["published"], y, "D", color=PUBLISHED_COLOR, markersize=7, zorder=4)
    published = [scale * r["published"] for r in rows if r["published"] is not None]
    for value in sorted(set(published)):
        ax.axvline(value, color=PUBLISHED_COLOR, alpha=0.15, linewidth=1)
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows])
    ax.set_ylim(len(rows) - 0.4, -0.6)  # top to bottom, without matplotlib's 5% margins (5 empty rows at 110)
    unit = "%" if scale == 100 else report["protocol"].get("unit", "fraction")
    ax.set_xlabel(f"AUBC ({report['protocol']['aubc_variant']}, {unit})")
    ax.set_title(f"{report['protocol']['name']} on {report['dataset']['name']}: published vs reproduced")
    ax.grid(axis="x", alpha=0.3)
    if rows:
        ax.legend(handles=forest_legend(rows), loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
                  frameon=False)
    else:
        ax.text(0.5, 0.5, "no cell with an interval", ha="center", va="center", transform=ax.transAxes)
    fig.savefig(path)
    plt.close(fig)
