"""Self-contained HTML renderings of token attributions.

:func:`token_heatmap_html` renders one method's scores as a coloured text
fragment; :func:`comparison_page` stacks several methods into a standalone
HTML document (inline CSS, no scripts, no external assets), e.g. for the
``captum-prxai explain --html`` command. :data:`STYLE` holds the CSS both use,
so other pages (the explorer) can embed fragments and reuse it.

Colour scales (see :mod:`captum_prxai.viz._colors`):

* unsigned methods (PageRank probabilities, the PR-XAI default: see
  docs/signed.md) use a **sequential** white-to-orange scale from 0,
  normalised by the largest score, so the top token always gets the full
  colour even when every score is tiny; scores below 0 are drawn as 0;
* signed methods (Integrated Gradients, Input x Gradient ...) use a
  **diverging** scale (green for, red against the explained class)
  normalised by the largest absolute score.

A method's scale is its registry entry's ``signed``
(:attr:`captum_prxai.methods.MethodSpec.signed`), looked up by the ``method``
name or label; a method the registry does not know is drawn signed when any
score is negative. Each heatmap's legend names its scale ("signed" or
"unsigned") and says how to read it.

Every piece of text (tokens, labels, method names, titles) is HTML-escaped,
so a text such as ``<script>alert(1)</script>`` is displayed, never run.
"""

from __future__ import annotations

import html
from typing import Any, Mapping, Sequence

from captum_prxai.exceptions import PRXAIError
from captum_prxai.viz import _colors
from captum_prxai.viz.tokens import display_token, explained_word, is_special_token, shown_words, top_words

__all__ = ["STYLE", "token_heatmap_html", "comparison_page", "score_color", "escape"]

#: CSS for the fragments made by :func:`token_heatmap_html` and pages made by :func:`comparison_page`.
STYLE = """
.prx-page { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
  color: #1f2328; background: #ffffff; max-width: 60rem; margin: 1.5rem auto; padding: 0 1rem; }
.prx-page h1 { font-size: 1.35rem; margin: 0 0 .4rem 0; overflow-wrap: anywhere; }
.prx-page .prx-meta { color: #57606a; margin: 0 0 1rem 0; }
.prx-heatmap { border: 1px solid #d0d7de; border-radius: 6px; padding: .6rem .8rem; margin: 0 0 .9rem 0;
  background: #ffffff; font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
.prx-title { display: flex; flex-wrap: wrap; gap: .25rem 1rem; align-items: baseline; font-size: .9rem;
  color: #57606a; margin-bottom: .45rem; }
.prx-title .prx-method { font-weight: 700; color: #1f2328; font-size: 1rem; }
.prx-title .prx-label { font-weight: 600; color: #1f2328; }
.prx-tokens { line-height: 2.1; font-size: 1rem; white-space: normal; overflow-wrap: anywhere; word-break: normal; }
.prx-tok { padding: .12rem .22rem; border-radius: 3px; white-space: pre-wrap; overflow-wrap: anywhere;
  box-decoration-break: clone; -webkit-box-decoration-break: clone; }
.prx-tok.prx-special { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .8em;
  outline: 1px dashed #8c959f; outline-offset: -1px; }
.prx-tok.prx-explained { outline: 2px solid #24292f; outline-offset: -1px; }
.prx-legend { display: flex; align-items: center; gap: .4rem; font-size: .75rem; color: #57606a; margin-top: .45rem; }
.prx-legend-kind { font-weight: 600; color: #1f2328; }
.prx-legend-bar { display: inline-block; width: 9rem; height: .6rem; border: 1px solid #d0d7de; border-radius: 2px; }
.prx-top { border-collapse: collapse; font-size: .85rem; margin: .2rem 0 1.2rem 0; }
.prx-top th, .prx-top td { border: 1px solid #d0d7de; padding: .2rem .5rem; text-align: left; vertical-align: top;
  overflow-wrap: anywhere; }
.prx-top th { background: #f6f8fa; }
.prx-top td.prx-num { text-align: right; font-variant-numeric: tabular-nums; }
.prx-extra { margin: 1rem 0; overflow-x: auto; }
.prx-extra svg { height: auto; }
.prx-foot { color: #8c959f; font-size: .75rem; margin-top: 1.5rem; }
"""


_DOT = " \u00b7 "


def escape(text: Any) -> str:
    """``text`` (any object, as ``str``) with ``& < > " '`` escaped, safe inside HTML text and attributes."""
    return html.escape(str(text), quote=True)


def _fmt_score(x: float) -> str:
    if x == 0:
        return "0"
    return f"{x:.4g}" if abs(x) >= 1e-3 else f"{x:.3e}"


def score_color(score: float, top: float, signed: bool) -> str:
    """CSS ``rgb(...)`` background for ``score`` on a scale whose full colour is at ``top``.

    Args:
        score: The score to colour.
        top: The score (or absolute score, if ``signed``) that gets the full colour.
        signed: Use the diverging (green/red) scale instead of the sequential one.
    """
    if top <= 0:
        t = 0.0
    elif signed:
        t = max(-1.0, min(1.0, score / top))
    else:
        t = max(0.0, min(1.0, score / top))
    return _colors.css_rgb(_colors.intensity_rgb(t, signed))


def _legend(top: float, signed: bool, clipped: bool, below_zero: bool = False) -> str:
    """The legend under a heatmap: the scale's kind, its colour bar from end to end, and how to read it."""
    if signed:
        lo = _colors.css_rgb(_colors.intensity_rgb(-1.0, True))
        hi = _colors.css_rgb(_colors.intensity_rgb(1.0, True))
        gradient = f"linear-gradient(to right, {lo}, rgb(255,255,255), {hi})"
        left, right = f"\u2212{_fmt_score(top)}", f"+{_fmt_score(top)}"
    else:
        hi = _colors.css_rgb(_colors.intensity_rgb(1.0, False))
        gradient = f"linear-gradient(to right, rgb(255,255,255), {hi})"
        left, right = "0", _fmt_score(top)
    note = _colors.legend_note(signed, below_zero=below_zero and not signed, clipped=clipped)
    return (
        '<div class="prx-legend">'
        f'<span class="prx-legend-kind">{_colors.scale_kind(signed)}:</span>'
        f"<span>{escape(left)}</span>"
        f'<span class="prx-legend-bar" style="background:{gradient}"></span>'
        f"<span>{escape(right)}</span>"
        f'<span class="prx-legend-note">({escape(note)})</span>'
        "</div>"
    )


def token_heatmap_html(
    tokens: Sequence[str],
    scores: Sequence[float],
    *,
    method: str,
    predicted_label: str | None = None,
    probability: float | None = None,
    merge_subwords: bool = False,
    signed: bool | None = None,
    scale_special_tokens: bool = False,
    seconds: float | None = None,
    explained_position: int | None = None,
    top: float | None = None,
) -> str:
    """Render one method's token scores as a coloured HTML fragment.

    The fragment is a ``<div class="prx-heatmap">`` holding a title row
    (method, predicted label, probability), one ``<span class="prx-tok"
    data-score="...">`` per token (or per word, with ``merge_subwords``) whose
    background colour encodes its score, and a small colour legend. Style it
    with :data:`STYLE`.

    Args:
        tokens: Token strings (``tokenizer.convert_ids_to_tokens(ids)``).
        scores: One score per token: list, numpy array or tensor of shape
            ``(T,)`` (or ``(1, T)``).
        method: Name of the attribution method, shown in the title.
        predicted_label: Predicted class name, shown in the title.
        probability: Probability of the predicted class, shown in the title.
        merge_subwords: Merge WordPiece ``##`` / SentencePiece ``▁`` /
            byte-BPE ``Ġ`` pieces back into words; a word's score is the
            sum of its pieces' scores (``data-score`` holds that sum).
        signed: Use the diverging (green positive / red negative) scale
            (``True``) or the sequential one from 0 (``False``). Default: the
            registered method's :attr:`~captum_prxai.methods.MethodSpec.signed`
            (``method`` looked up as a registry name, alias or label); for a
            method the registry does not know, diverging if any score is
            negative.
        scale_special_tokens: Let special tokens (``[CLS]``, ``[SEP]``,
            ``<s>`` ...) set the colour scale. Default ``False``: the scale
            runs to the largest score among ordinary tokens, and special
            tokens above it are drawn at full colour, since PageRank often
            gives the explained ``[CLS]`` token most of the mass.
        seconds: Time the attribution took, shown in the title row.
        explained_position: Index (in ``tokens``) of the token whose output
            is explained, e.g. :attr:`~captum_prxai.viz.explanation.TextExplanation.explained_position`.
            It is outlined (class ``prx-explained``) and, like a special
            token, left out of the colour scale: for a decoder it is the last
            word, which PageRank methods rank first through their teleport.
        top: The score (absolute, if ``signed``) that gets the full colour,
            e.g. a scale shared with other heatmaps; default: this heatmap's
            largest (see ``scale_special_tokens``).

    Returns:
        An HTML fragment (a string). All text in it is escaped.

    Raises:
        PRXAIError: if the number of scores differs from the number of tokens
            or a score is NaN / infinite.
    """
    words, values, groups = shown_words(tokens, scores, merge_subwords)
    signed = _colors.resolve_signed(signed, method, values)
    explained = explained_word(groups, explained_position)
    if top is None:
        top = _colors.display_max(words, values, signed, include_special=scale_special_tokens, explained=explained)
    ts = _colors.intensities(values, signed, top)

    title = [f'<span class="prx-method">{escape(method)}</span>']
    if predicted_label is not None:
        title.append(f'<span class="prx-pred">predicted: <span class="prx-label">{escape(predicted_label)}</span></span>')
    if probability is not None:
        title.append(f'<span class="prx-prob">p = {float(probability):.3f}</span>')
    if seconds is not None:
        title.append(f'<span class="prx-time">{float(seconds) * 1000:.1f} ms</span>')

    spans = []
    for k, (word, value, t, group) in enumerate(zip(words, values, ts, groups)):
        bg_rgb = _colors.intensity_rgb(t, signed)
        bg = _colors.css_rgb(bg_rgb)
        fg = _colors.css_rgb(_colors.text_on(bg_rgb))
        cls = "prx-tok prx-special" if is_special_token(word) else "prx-tok"
        tip = _fmt_score(value)
        if k == explained:
            cls += " prx-explained"
            tip += " (the explained token; left out of the colour scale)"
        shown = word if merge_subwords else display_token(word)
        spans.append(
            f'<span class="{cls}" data-score="{value!r}" data-index="{group[0]}" data-len="{len(group)}"'
            f' title="{escape(tip)}" style="background-color:{bg};color:{fg}">{escape(shown)}</span>'
        )
    return (
        f'<div class="prx-heatmap" data-method="{escape(method)}" data-signed="{str(bool(signed)).lower()}">'
        f'<div class="prx-title">{"".join(title)}</div>'
        f'<div class="prx-tokens">{" ".join(spans)}</div>'
        f"{_legend(top, signed, any((abs(v) if signed else v) > top for v in values), any(v < 0 for v in values))}"
        "</div>"
    )


def _top_table(
    tokens: Sequence[str], method_scores: Mapping[str, Any], merge: bool, k: int = 5,
    explained_position: int | None = None,
) -> str:
    head = "".join(f"<th>{escape(m)}</th>" for m in method_scores)
    columns = [top_words(tokens, scores, merge, k, explained_position) for scores in method_scores.values()]
    rows = []
    for r in range(min(k, max((len(c) for c in columns), default=0))):
        cells = []
        for col in columns:
            if r < len(col):
                w, v = col[r]
                cells.append(f"<td>{escape(w)} <small>({escape(_fmt_score(v))})</small></td>")
            else:
                cells.append("<td></td>")
        rows.append(f'<tr><td class="prx-num">{r + 1}</td>{"".join(cells)}</tr>')
    left_out = "special tokens and the explained token" if explained_position is not None else "special tokens"
    return (
        '<table class="prx-top"><caption style="text-align:left">Top tokens per method (largest |score|, '
        f"{left_out} left out)</caption>"
        f"<tr><th>#</th>{head}</tr>{''.join(rows)}</table>"
    )


def comparison_page(
    tokens: Sequence[str],
    method_scores: Mapping[str, Sequence[float]],
    *,
    title: str,
    predicted_label: str | None = None,
    probability: float | None = None,
    timings: Mapping[str, float] | None = None,
    merge_subwords: bool = False,
    extra_html: str | None = None,
    explained_position: int | None = None,
) -> str:
    """A standalone HTML document comparing several attribution methods on one text.

    Each method gets a heatmap (see :func:`token_heatmap_html`; its colour
    scale, signed or unsigned, is the registered method's, looked up by its
    key in ``method_scores``), stacked in the order of ``method_scores``,
    followed by a side-by-side table of the top-5 tokens of every method.
    The document has inline CSS only: no scripts, no external assets, no
    IPython needed.

    Args:
        tokens: Token strings shared by all methods.
        method_scores: Method name -> one score per token.
        title: Page title (escaped).
        predicted_label: Predicted class name, shown under the title.
        probability: Probability of the predicted class.
        timings: Method name -> seconds the attribution took; shown per method.
        merge_subwords: Merge sub-word pieces into words (scores summed).
        extra_html: Trusted HTML inserted after the table (e.g. an attention
            graph from :func:`captum_prxai.viz.graph.attention_graph_svg`).
            It is **not** escaped.
        explained_position: Index of the explained token (outlined, and left
            out of every colour scale; see :func:`token_heatmap_html`).

    Returns:
        The HTML document as a string.

    Raises:
        PRXAIError: if ``method_scores`` is empty or a method's scores do not
            match the tokens.
    """
    if not method_scores:
        raise PRXAIError("comparison_page needs at least one method in method_scores.")
    timings = dict(timings or {})
    meta = []
    if predicted_label is not None:
        meta.append(f"predicted: <b>{escape(predicted_label)}</b>")
    if probability is not None:
        meta.append(f"p = {float(probability):.3f}")
    meta.append(f"{len(tokens)} tokens")
    blocks = [
        token_heatmap_html(tokens, scores, method=name, merge_subwords=merge_subwords, seconds=timings.get(name),
                           explained_position=explained_position)
        for name, scores in method_scores.items()
    ]
    body = (
        f"<h1>{escape(title)}</h1>"
        f'<p class="prx-meta">{_DOT.join(meta)}</p>'
        + "".join(blocks)
        + _top_table(tokens, method_scores, merge_subwords, explained_position=explained_position)
        + (f'<div class="prx-extra">{extra_html}</div>' if extra_html else "")
        + '<p class="prx-foot">Generated by captum-prxai (PR-XAI: PageRank-based attribution for transformers).</p>'
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>"
        f'<body><main class="prx-page">{body}</main></body></html>\n'
    )
