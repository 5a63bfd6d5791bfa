"""Token attributions as a coloured terminal line (ANSI 24-bit background colours).

Colours follow the same scales as :mod:`captum_prxai.viz.html`: a method's
scale is its registry entry's ``signed`` (diverging red/green for signed
methods, sequential from 0 for unsigned ones such as the PR-XAI default; see
docs/signed.md), and :func:`terminal_legend` gives the line that says which.
Setting the ``NO_COLOR`` environment variable (https://no-color.org) to any
non-empty value turns colour off; tokens are then followed by their rescaled
score in brackets.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from captum_prxai.viz import _colors
from captum_prxai.viz.tokens import display_token, explained_word, shown_words

__all__ = ["terminal_heatmap", "terminal_legend", "color_enabled"]

RESET = "\x1b[0m"


def color_enabled(color: bool | None = None) -> bool:
    """Resolve a colour setting: ``None`` means "on unless ``NO_COLOR`` is set"."""
    if color is not None:
        return bool(color)
    return not os.environ.get("NO_COLOR")


def terminal_heatmap(
    tokens: Sequence[str],
    scores: Any,
    *,
    signed: bool | None = None,
    merge_subwords: bool = False,
    color: bool | None = None,
    explained_position: int | None = None,
    method: str | None = None,
) -> str:
    """One line of text with every token's background coloured by its score.

    Args:
        tokens: Token strings.
        scores: One score per token (list, array or tensor of shape ``(T,)``).
        signed: Diverging (green/red) scale (``True``) or sequential from 0
            (``False``); default: the registered ``method``'s ``signed``, and
            for a method the registry does not know, whether any score is
            negative (see :func:`captum_prxai.viz._colors.resolve_signed`).
        merge_subwords: Merge sub-word pieces into words, summing their scores.
            Special tokens (``[CLS]`` ...) do not set the colour scale (see
            :func:`captum_prxai.viz.html.token_heatmap_html`); they clip.
        color: Force colour on / off. Default: on unless ``NO_COLOR`` is set.
        explained_position: Index of the explained token; like a special
            token it does not set the colour scale (a decoder's last word,
            which PageRank methods rank first through their teleport).
        method: Registry name, alias or label of the method that gave the
            scores; chooses the scale when ``signed`` is not given.

    Returns:
        The line (no trailing newline). With colour: ANSI escape sequences
        (``ESC[48;2;R;G;Bm``). Without: ``token[0.42]``, the score divided by
        the largest (absolute) score of an ordinary token, for tokens where
        that ratio is at least 0.005 in size (special tokens may exceed 1).
    """
    words, values, groups = shown_words(tokens, scores, merge_subwords)
    if not merge_subwords:
        words = [display_token(w) for w in words]
    signed = _colors.resolve_signed(signed, method, values)
    explained = explained_word(groups, explained_position)
    top = _colors.display_max(words, values, signed, explained=explained)
    ts = _colors.intensities(values, signed, top)
    parts = []
    if color_enabled(color):
        for word, t in zip(words, ts):
            r, g, b = _colors.intensity_rgb(t, signed)
            fr, fg, fb = _colors.text_on((r, g, b))
            parts.append(f"\x1b[48;2;{r};{g};{b}m\x1b[38;2;{fr};{fg};{fb}m{_clean(word)}{RESET}")
    else:
        # unclipped ratio to the scale maximum: special tokens above it show values > 1
        for word, v in zip(words, values):
            ratio = v / top if top > 0 else 0.0
            if abs(ratio) < 0.005:
                parts.append(_clean(word))
            else:
                parts.append(f"{_clean(word)}[{ratio:+.2f}]" if signed else f"{_clean(word)}[{ratio:.2f}]")
    return " ".join(parts)


def terminal_legend(
    scores: Any,
    *,
    signed: bool | None = None,
    method: str | None = None,
    color: bool | None = None,
) -> str:
    """The legend line under a :func:`terminal_heatmap`: the scale's kind and how to read it.

    For example ``scale: unsigned, white 0 to the largest score; low means
    little support, not evidence against``, with (when colour is on) a small
    bar of the scale's colours after ``scale:``.

    Args:
        scores: The scores of the heatmap (whether any is negative is noted on
            the unsigned scale, which draws them as 0).
        signed: As for :func:`terminal_heatmap`.
        method: As for :func:`terminal_heatmap`.
        color: Force the colour bar on / off. Default: on unless ``NO_COLOR`` is set.

    Returns:
        The line (no trailing newline, no indent).
    """
    values = _colors.to_float_list(scores)
    signed = _colors.resolve_signed(signed, method, values)
    note = _colors.legend_note(signed, below_zero=any(v < 0 for v in values))
    bar = ""
    if color_enabled(color):
        steps = (-1.0, -0.5, 0.0, 0.5, 1.0) if signed else (0.0, 0.25, 0.5, 0.75, 1.0)
        cells = []
        for t in steps:
            r, g, b = _colors.intensity_rgb(t, signed)
            cells.append(f"\x1b[48;2;{r};{g};{b}m  {RESET}")
        bar = "".join(cells) + " "
    return f"scale: {bar}{_colors.scale_kind(signed)}, {note}"


def _clean(word: str) -> str:
    """Drop control characters (a token must not move the cursor or change colours)."""
    return "".join(ch if ch.isprintable() else "\ufffd" for ch in word)
