"""What a streaming fit shows the user afterwards: a plot of online F against rows seen (dmocli/progress.py draws
its progress while it runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dmocli.report import save_figure


def plot_online_curve(path: str | Path, online: dict[str, Any], title: str) -> None:
    """Online (progressive) F-beta against rows seen, with pass boundaries when there were several."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = online["curve"]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    ax.plot(curve["rows"], curve["f_beta"], color="tab:blue", label=f"online F{online['beta']:g}")
    boundary = 0
    for i, one_pass in enumerate(online["passes"][:-1]):
        boundary += one_pass["n"]
        ax.axvline(boundary, color="gray", linestyle=":", linewidth=1, label="new pass" if i == 0 else None)
    ax.set_xlabel("rows seen")
    ax.set_ylabel(f"online F{online['beta']:g} (predictions made before each label)")
    ax.set_ylim(0, 1.01)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    save_figure(fig, path)
