"""The token graph behind PR-XAI, drawn with matplotlib.

PR-XAI turns attention into a weighted directed graph over the input tokens
and runs PageRank on it. :func:`plot_attention_graph` draws such a graph:
tokens are nodes (sized by their PageRank score), and the strongest edges are
arrows whose width follows their weight. The edge convention is the one of
:func:`captum_prxai.pagerank`: ``adjacency[i, j]`` is the weight of the edge
``i -> j``.
"""

from __future__ import annotations

import io
import math
import re
from pathlib import Path as _FilePath
from typing import Any, Sequence

from captum_prxai.exceptions import PRXAIError
from captum_prxai.viz import _colors
from captum_prxai.viz.tokens import display_token, explained_word

__all__ = ["plot_attention_graph", "attention_graph_svg", "top_edges_of"]

_FORMATS = ("png", "svg", "pdf")


def _matrix(adjacency: Any) -> list[list[float]]:
    if hasattr(adjacency, "detach"):
        adjacency = adjacency.detach().cpu().double().numpy()
    if hasattr(adjacency, "tolist"):
        adjacency = adjacency.tolist()
    rows = [list(r) for r in adjacency]
    if len(rows) == 1 and rows and rows[0] and isinstance(rows[0][0], (list, tuple)):
        rows = [list(r) for r in rows[0]]  # a batch of one (1, T, T)
    n = len(rows)
    if any(len(r) != n or any(isinstance(v, (list, tuple)) for v in r) for r in rows):
        raise PRXAIError("adjacency must be a square (T, T) matrix (or a batch of one, (1, T, T)).")
    out = [[float(v) for v in r] for r in rows]
    if any(not math.isfinite(v) for r in out for v in r):
        raise PRXAIError("adjacency contains NaN or infinite weights.")
    return out


def _arc_height(span: int) -> float:
    """Height of the arc joining two tokens ``span`` positions apart (grows slowly with span)."""
    return 0.35 * math.sqrt(abs(span))


def top_edges_of(adjacency: Any, k: int) -> list[tuple[int, int, float]]:
    """The ``k`` edges ``(i, j, weight)`` with the largest absolute weight, self-loops excluded.

    Zero-weight edges are never returned. Ties keep row-major order.
    """
    a = _matrix(adjacency)
    edges = [(i, j, w) for i, row in enumerate(a) for j, w in enumerate(row) if i != j and w != 0.0]
    edges.sort(key=lambda e: -abs(e[2]))
    return edges[: max(0, int(k))]


def plot_attention_graph(
    tokens: Sequence[str],
    adjacency: Any,
    node_scores: Any,
    *,
    top_edges: int = 30,
    path: str | _FilePath | None = None,
    fmt: str = "png",
    layout: str = "line",
    title: str | None = None,
    explained_position: int | None = None,
    signed: bool | None = None,
    method: str | None = None,
):
    """Draw the token graph: nodes sized by PageRank score, the strongest edges as arrows.

    Args:
        tokens: Token strings, one per node.
        adjacency: Edge weights ``(T, T)`` (tensor, array or nested lists);
            ``adjacency[i, j]`` is the edge ``i -> j``. A ``(1, T, T)`` batch
            of one is accepted.
        node_scores: One score per token ``(T,)``, e.g. the PageRank scores.
            Node area is proportional to the score divided by the largest
            score of an ordinary token (special tokens such as ``[CLS]`` clip
            at the largest size); node colour uses the same scale as the HTML
            heatmaps.
        top_edges: How many of the heaviest edges to draw (self-loops are
            never drawn). Default: 30.
        path: If given, save the figure there in format ``fmt``.
        fmt: ``"png"``, ``"svg"`` or ``"pdf"``. Default: ``"png"``.
        layout: ``"line"`` (tokens left to right in reading order, edges as
            arcs; forward edges above the line, backward below) or
            ``"circle"``. Default: ``"line"``.
        title: Axes title.
        explained_position: Index of the explained token; like a special
            token it does not set the node scale (a decoder's last word,
            which the teleport makes the largest node).
        signed: Colour the nodes on the diverging scale (``True``) or the
            sequential one from 0 (``False``); default: the registered
            ``method``'s ``signed``, and for a method the registry does not
            know, whether any node score is negative (as the heatmaps).
        method: Registry name, alias or label of the method whose scores
            ``node_scores`` are; chooses the scale when ``signed`` is not given.

    Returns:
        A ``matplotlib.figure.Figure`` (not attached to pyplot).

    Raises:
        PRXAIError: mismatched sizes, unknown ``fmt`` or ``layout``.
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch
    from matplotlib.path import Path

    fmt = fmt.lower().lstrip(".")
    if fmt not in _FORMATS:
        raise PRXAIError(f"unknown figure format {fmt!r}; use one of {', '.join(_FORMATS)}.")
    if layout not in ("line", "circle"):
        raise PRXAIError(f"unknown layout {layout!r}; use 'line' or 'circle'.")
    a = _matrix(adjacency)
    scores = _colors.to_float_list(node_scores, "node_scores")
    labels = [display_token(str(t)) for t in tokens]
    n = len(labels)
    if not (len(a) == n == len(scores)):
        raise PRXAIError(
            f"got {n} tokens, a {len(a)}x{len(a)} adjacency and {len(scores)} node scores; all must match."
        )
    if n == 0:
        raise PRXAIError("cannot draw an empty graph (no tokens).")
    signed = _colors.resolve_signed(signed, method, scores)
    explained = explained_word([[i] for i in range(n)], explained_position)
    ts = _colors.intensities(scores, signed, _colors.display_max([str(t) for t in tokens], scores, signed,
                                                                 explained=explained))
    edges = top_edges_of(a, top_edges)
    wmax = max((abs(w) for _, _, w in edges), default=1.0) or 1.0

    if layout == "line":
        width = min(max(6.0, 0.55 * n + 1.5), 40.0)
        fig = Figure(figsize=(width, 4.2), dpi=110, layout="constrained")
        ax = fig.add_subplot()
        pos = [(float(i), 0.0) for i in range(n)]
    else:
        size = min(max(5.0, 0.22 * n + 3.0), 24.0)
        fig = Figure(figsize=(size, size), dpi=110, layout="constrained")
        ax = fig.add_subplot()
        pos = [(math.cos(math.pi / 2 - 2 * math.pi * i / n), math.sin(math.pi / 2 - 2 * math.pi * i / n)) for i in range(n)]

    # node area (points^2) proportional to score / max
    base, span = 30.0, 900.0 if n <= 40 else 400.0
    sizes = [base + span * abs(t) for t in ts]
    node_colors = [tuple(c / 255 for c in _colors.intensity_rgb(t, signed)) for t in ts]

    for i, j, w in sorted(edges, key=lambda e: abs(e[2])):  # heaviest drawn last (on top)
        strength = abs(w) / wmax
        style = dict(
            arrowstyle="-|>",
            mutation_scale=6 + 8 * strength,
            linewidth=0.4 + 3.6 * strength,
            color=(0.13, 0.33, 0.62) if w >= 0 else (0.75, 0.19, 0.15),
            alpha=0.25 + 0.65 * strength,
            linestyle="-" if w >= 0 else "--",
            shrinkA=5,
            shrinkB=5,
            zorder=1,
        )
        if layout == "line":
            # a quadratic Bezier in data coordinates: forward edges above the line, backward below
            peak = _arc_height(j - i)
            ctrl = ((pos[i][0] + pos[j][0]) / 2, 2 * peak if j > i else -2 * peak)
            bezier = Path([pos[i], ctrl, pos[j]], [Path.MOVETO, Path.CURVE3, Path.CURVE3])
            ax.add_patch(FancyArrowPatch(path=bezier, **style))
        else:
            ax.add_patch(FancyArrowPatch(pos[i], pos[j], connectionstyle="arc3,rad=0.15", **style))

    xs, ys = zip(*pos)
    ax.scatter(xs, ys, s=sizes, c=node_colors, edgecolors="#444444", linewidths=0.7, zorder=2)
    box = dict(boxstyle="round,pad=0.12", facecolor="white", edgecolor="none", alpha=0.85)
    for (x, y), label in zip(pos, labels):
        if layout == "line":
            ax.text(x, y - 0.3, label, rotation=60 if n > 12 else 0, ha="right" if n > 12 else "center",
                    va="top", fontsize=9, parse_math=False, zorder=3, rotation_mode="anchor", bbox=box)
        else:
            ang = math.atan2(y, x)
            ca = math.cos(ang)
            ax.text(1.2 * ca, 1.2 * math.sin(ang), label, fontsize=9, parse_math=False, zorder=3, va="center",
                    ha="left" if ca > 0.3 else "right" if ca < -0.3 else "center", bbox=box)
    if layout == "line":
        up = max((_arc_height(j - i) for i, j, _ in edges if j > i), default=0.0)
        down = max((_arc_height(i - j) for i, j, _ in edges if j < i), default=0.0)
        ax.set_xlim(-0.8, n - 0.2)
        ax.set_ylim(-max(down + 0.3, 1.4 if n > 12 else 0.7), max(up + 0.3, 0.8))
    else:
        ax.set_xlim(-1.6, 1.6)
        ax.set_ylim(-1.3, 1.3)
        ax.set_aspect("equal")
    ax.set_axis_off()
    note = (f"top {len(edges)} edges (width ~ weight), node size ~ score, "
            f"colour: {_colors.scale_kind(signed)} scale")
    ax.set_title(f"{title}\n{note}" if title else note, fontsize=10, parse_math=False)
    if path is not None:
        path = _FilePath(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format=fmt)
    return fig


def attention_graph_svg(
    tokens: Sequence[str],
    adjacency: Any,
    node_scores: Any,
    *,
    top_edges: int = 30,
    layout: str = "line",
    title: str | None = None,
    explained_position: int | None = None,
    signed: bool | None = None,
    method: str | None = None,
) -> str:
    """The same drawing as :func:`plot_attention_graph`, as an inline ``<svg>`` element.

    The XML prolog and DOCTYPE are removed so the string can be placed inside
    an HTML page. Text is drawn as glyph paths, so token text cannot inject
    markup.
    """
    import matplotlib

    fig = plot_attention_graph(tokens, adjacency, node_scores, top_edges=top_edges, layout=layout, title=title,
                               explained_position=explained_position, signed=signed, method=method)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "captum-prxai"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    svg = re.sub(r"^<\?xml[^>]*\?>\s*", "", svg)
    svg = re.sub(r"^<!DOCTYPE[^>]*>\s*", "", svg, flags=re.S)
    return svg.strip()
