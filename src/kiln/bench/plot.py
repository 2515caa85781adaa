"""The ``--plot`` chart: Kiln and torch.compile side by side, per model.

Two panels of grouped bars, one bar per frontend for each model:

* steady-state speedup over eager (higher is better; the dashed line is 1x, i.e.
  no faster than eager);
* capture time, the first compiled call minus a steady eager call (lower is
  better; log scale, as frontends differ by orders of magnitude).

A model that did not pass gets no bar but its status written where the bar would
be, so a missing bar is never mistaken for a zero.  matplotlib is imported only
here, with the Agg backend, so the chart works without a display.
"""
from __future__ import annotations

from .report import group_rows
from .results import PASS, Result

COLORS = {"kiln": "#d95f02", "torch": "#1b9e77"}


def plot(rows: list[Result], path: str, title: str = "kiln bench") -> str:
    """Write the chart to ``path`` (PNG) and return the path."""
    # matplotlib is an optional dependency (the ``models`` extra), needed only for --plot
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # (see above)

    groups = group_rows(rows)
    frontends = list(dict.fromkeys(r.frontend for r in rows))
    labels = [label for label, _ in groups]
    width = 0.8 / max(len(frontends), 1)
    fig, axes = plt.subplots(2, 1, figsize=(max(6.0, 0.9 * len(labels) + 2), 7), sharex=True)
    panels = [("speedup", "speedup over eager (x)", False), ("capture_s", "capture time (s)", True)]
    for ax, (attr, ylabel, log) in zip(axes, panels):
        smallest = largest = None
        for i, fe in enumerate(frontends):
            xs, heights, notes = [], [], []
            for x, (_, group) in enumerate(groups):
                row = group.get(fe)
                if row is None:
                    continue
                pos = x + (i - (len(frontends) - 1) / 2) * width
                value = getattr(row, attr) if row.status == PASS else None
                if value is None:
                    notes.append((pos, row.status))
                    continue
                value = max(value, 1e-3) if log else value
                xs.append(pos)
                heights.append(value)
                smallest = value if smallest is None else min(smallest, value)
                largest = value if largest is None else max(largest, value)
            bars = ax.bar(xs, heights, width, label=fe, color=COLORS.get(fe))
            ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
            for pos, status in notes:
                ax.text(pos, 0.02, status, rotation=90, ha="center", va="bottom", fontsize=7,
                        transform=ax.get_xaxis_transform(), color="#b00020")
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")
            if smallest is not None:   # bars on a log axis need a floor below the smallest one
                ax.set_ylim(smallest / 3, largest * 2)
        else:
            ax.margins(y=0.12)     # room for the value labels
            ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(title="frontend")
    axes[0].set_title(title)
    axes[-1].set_xticks(range(len(labels)))
    axes[-1].set_xticklabels(labels, rotation=45, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
