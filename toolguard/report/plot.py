"""PEC and PEC-eligible curves per group with Wilson bands (optional extra ``plot``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import ToolGuardError
from .escape import mathtext_literal
from .metrics import wilson_band
from .render import group_name

if TYPE_CHECKING:
    from .build import Report

PLOT_EXTRA_HINT = "plotting needs matplotlib: pip install 'toolguard-otel[plot]'"


class PlotUnavailable(ToolGuardError):
    """matplotlib is not installed."""


def plot_report(report: Report, path: str) -> None:
    """Write the curves to ``path``; the format follows its suffix (.png, .svg, .pdf)."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never open a window, work without a display
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise PlotUnavailable(PLOT_EXTRA_HINT) from None

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    titles = ("PEC@k (all trajectories)", "PEC-eligible@k (trajectories that reached k)")
    for g in report["groups"]:
        n, pec, elig, at = g["n"], g["pec"], g["pec_elig"], g["n_at_depth"]
        if not pec:
            continue
        ks = list(range(1, len(pec) + 1))
        survivors = [round(p * n) for p in pec]  # pec = survivors / n exactly
        name = mathtext_literal(group_name(g["labels"]))  # shown as written, never as math
        for ax, vals, totals in ((axes[0], pec, [n] * len(pec)), (axes[1], elig, at)):
            band = wilson_band(survivors, totals)
            # b is None only where the total is 0, and there v is None too.
            pts = [
                (k, v, b)
                for k, v, b in zip(ks, vals, band, strict=True)
                if v is not None and b is not None
            ]
            xs = [p[0] for p in pts]
            line = ax.plot(xs, [p[1] for p in pts], marker="o", ms=3, label=f"{name} (N={n})")
            ax.fill_between(
                xs,
                [p[2][0] for p in pts],
                [p[2][1] for p in pts],
                color=line[0].get_color(),
                alpha=0.18,
                linewidth=0,
            )
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title)
        ax.set_xlabel("depth k (tool calls)")
        ax.set_ylim(-0.02, 1.02)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # depths are whole calls
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("share executable through depth k (95% Wilson band)")
    axes[1].legend(fontsize="small", loc="best")
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise ToolGuardError(f"{path}: cannot write the plot: {exc}") from None
    finally:
        plt.close(fig)
