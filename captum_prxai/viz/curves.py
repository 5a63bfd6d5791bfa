"""Deletion / insertion curves drawn with matplotlib.

A deletion curve plots the model's probability for the predicted class as
the top-scored tokens are removed (masked) step by step; a faithful
attribution makes it fall fast, i.e. gives a small area under the curve
(AOPC-style metrics use the same curves).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from captum_prxai.exceptions import PRXAIError

__all__ = ["plot_deletion_curves", "curve_auc", "draw_curves"]


def _as_list(values: Any) -> list[float]:
    if hasattr(values, "detach"):
        values = values.detach().cpu().double().numpy()
    if hasattr(values, "tolist"):
        values = values.tolist()
    return [float(v) for v in values]


def curve_auc(values: Sequence[float], fractions: Sequence[float]) -> float:
    """Area under a curve by the trapezoidal rule, normalised by the x range."""
    ys, xs = _as_list(values), _as_list(fractions)
    if len(xs) < 2:
        return float(ys[0]) if ys else 0.0
    area = sum((xs[i + 1] - xs[i]) * (ys[i + 1] + ys[i]) / 2 for i in range(len(xs) - 1))
    span = xs[-1] - xs[0]
    return area / span if span else 0.0


def draw_curves(
    ax: Any,
    curves: Mapping[str, Any],
    fractions: Any,
    *,
    bands: Mapping[str, Any] | None = None,
    colors: Mapping[str, Any] | None = None,
    dashed: Sequence[str] = ("random", "Random"),
    show_auc: bool = False,
) -> None:
    """Draw one curve per method on ``ax``, with optional ± bands (e.g. standard errors).

    The single drawing routine behind :func:`plot_deletion_curves` and the
    benchmark's ``deletion_curves.png``.

    Raises:
        PRXAIError: if a curve's length differs from ``fractions``.
    """
    xs = _as_list(fractions)
    markers = "osD^v<>ph*"
    for k, (name, values) in enumerate(curves.items()):
        ys = _as_list(values)
        if len(ys) != len(xs):
            raise PRXAIError(
                f"curve {name!r} has {len(ys)} points but there are {len(xs)} fractions; "
                "pass one value per fraction."
            )
        label = f"{name} (AUC {curve_auc(ys, xs):.3f})" if show_auc else str(name)
        style = {"color": colors[name]} if colors and name in colors else {}
        line, = ax.plot(xs, ys, marker=markers[k % len(markers)], markersize=3.5, linewidth=1.6, label=label,
                        linestyle="--" if name in dashed else "-", **style)
        if bands is not None and name in bands:
            spread = _as_list(bands[name])
            ax.fill_between(xs, [y - e for y, e in zip(ys, spread)], [y + e for y, e in zip(ys, spread)],
                            color=line.get_color(), alpha=0.15)
    ax.grid(True, alpha=0.3)


def plot_deletion_curves(
    curves: Mapping[str, Any],
    fractions: Any,
    path: str | Path | None = None,
    *,
    title: str = "Deletion curves",
    xlabel: str = "fraction of tokens removed (most important first)",
    ylabel: str = "probability of the predicted class",
    show_auc: bool = True,
):
    """Plot one curve per method against the fraction of tokens removed.

    Args:
        curves: Method name -> values at each step, array-like of shape
            ``(steps,)`` (for a dataset, average the per-example curves first).
        fractions: The x values, shape ``(steps,)`` (e.g. ``0, 0.1, ..., 1``).
        path: If given, save the figure there; the format follows the suffix
            (``.png``, ``.svg``, ``.pdf``).
        title: Axes title.
        xlabel: x-axis label.
        ylabel: y-axis label.
        show_auc: Add each curve's normalised area under the curve to its
            legend entry (lower is better for deletion curves).

    Returns:
        The ``matplotlib.figure.Figure`` (not attached to pyplot, so it is
        safe in scripts and threads; display it in notebooks by returning it).

    Raises:
        PRXAIError: if ``curves`` is empty or a curve's length differs from
            ``fractions``.
    """
    from matplotlib.figure import Figure

    if not curves:
        raise PRXAIError("plot_deletion_curves needs at least one curve.")
    xs = _as_list(fractions)
    fig = Figure(figsize=(6.0, 4.0), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    draw_curves(ax, curves, xs, show_auc=show_auc)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_xlim(min(xs), max(xs))
    ax.legend(fontsize="small", frameon=False)
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    return fig
