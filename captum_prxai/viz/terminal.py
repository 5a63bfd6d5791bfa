"""Token attributions as a coloured terminal line (ANSI 24-bit background colours).

Colours follow the same scales as :mod:`captum_prxai.viz.html`. Setting the
``NO_COLOR`` environment variable (https://no-color.org) to any non-empty
value turns colour off; tokens are then followed by their rescaled score in
brackets.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from captum_prxai.viz import _colors
from captum_prxai.viz.tokens import display_token, explained_word, shown_words

__all__ = ["terminal_heatmap", "color_enabled"]

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
) -> str:
    """One line of text with every token's background coloured by its score.

    Args:
        tokens: Token strings.
        scores: One score per token (list, array or tensor of shape ``(T,)``).
        signed: Diverging (green/red) scale; default: if any score is negative.
        merge_subwords: Merge sub-word pieces into words, summing their scores.
            Special tokens (``[CLS]`` ...) do not set the colour scale (see
            :func:`captum_prxai.viz.html.token_heatmap_html`); they clip.
        color: Force colour on / off. Default: on unless ``NO_COLOR`` is set.
        explained_position: Index of the explained token; like a special
            token it does not set the colour scale (a decoder's last word,
            which PageRank methods rank first through their teleport).

    Returns:
        The line (no trailing newline). With colour: ANSI escape sequences
        (``ESC[48;2;R;G;Bm``). Without: ``token[0.42]``, the score divided by
        the largest (absolute) score of an ordinary token, for tokens where
        that ratio is at least 0.005 in size (special tokens may exceed 1).
    """
    words, values, groups = shown_words(tokens, scores, merge_subwords)
    if not merge_subwords:
        words = [display_token(w) for w in words]
    if signed is None:
        signed = _colors.is_signed(values)
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


def _clean(word: str) -> str:
    """Drop control characters (a token must not move the cursor or change colours)."""
    return "".join(ch if ch.isprintable() else "\ufffd" for ch in word)
