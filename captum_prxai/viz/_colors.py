"""Colour scales shared by the HTML, terminal and Captum-record renderers.

Two scales are used throughout :mod:`captum_prxai.viz`:

* **sequential** (unsigned methods, e.g. PageRank probabilities and the PR-XAI
  default): white for 0, deepening orange for larger scores; the largest score
  gets the full colour and scores below 0 are drawn as 0.
* **diverging** (signed methods, e.g. Integrated Gradients): green for
  positive, red for negative, white for 0 (the same convention as
  :func:`captum.attr.visualization.visualize_text`); the largest absolute
  score gets the full colour.

Which scale a method gets is :func:`resolve_signed`: the caller's choice, else
the registered method's :attr:`~captum_prxai.methods.MethodSpec.signed`, else
(a method the registry does not know) whether any score is negative.
docs/signed.md gives the measurement behind the default's entry.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from captum_prxai.exceptions import PRXAIError

RGB = tuple[int, int, int]

WHITE: RGB = (255, 255, 255)
#: full colour of the sequential scale (orange-red, ColorBrewer "Oranges" 8/9)
SEQUENTIAL_MAX: RGB = (217, 72, 1)
#: full colour for positive scores on the diverging scale
POSITIVE_MAX: RGB = (26, 152, 80)
#: full colour for negative scores on the diverging scale
NEGATIVE_MAX: RGB = (215, 48, 39)


def to_float_list(scores: Any, name: str = "scores") -> list[float]:
    """Convert a 1-D tensor / array / sequence (or a ``(1, T)`` batch) to floats.

    Raises:
        PRXAIError: if the scores are not one-dimensional or not finite.
    """
    if hasattr(scores, "detach"):  # torch.Tensor
        scores = scores.detach().cpu().double().numpy()
    if hasattr(scores, "tolist") and not isinstance(scores, (list, tuple)):
        scores = scores.tolist()
    scores = list(scores)
    if len(scores) == 1 and isinstance(scores[0], (list, tuple)):
        scores = list(scores[0])  # a batch of one
    out: list[float] = []
    for value in scores:
        if isinstance(value, (list, tuple)):
            raise PRXAIError(
                f"{name} must be one score per token (a 1-D sequence); got a nested sequence. "
                "Pass the scores of a single example, e.g. attributions[0]."
            )
        f = float(value)
        if not math.isfinite(f):
            raise PRXAIError(f"{name} contain a non-finite value ({f}); cannot colour NaN or inf scores.")
        out.append(f)
    return out


def is_signed(scores: Sequence[float]) -> bool:
    """True if any score is negative (then the diverging scale is used)."""
    return any(s < 0 for s in scores)


def registered_signed(method: str | None) -> bool | None:
    """Whether the registered method ``method`` gives signed scores; ``None`` if it is not registered.

    ``method`` may be a registry name, an alias or a display label (tables and
    pages key scores by label, e.g. ``"Integrated Gradients"``).
    """
    if not isinstance(method, str) or not method.strip():
        return None
    from captum_prxai.methods import METHODS

    key = method.strip().lower()
    spec = METHODS.get(key)
    if spec is None:
        spec = next((s for s in METHODS.values() if key in s.aliases or s.label == method), None)
    return None if spec is None else bool(spec.signed)


def resolve_signed(signed: bool | None, method: str | None, scores: Sequence[float]) -> bool:
    """The scale for ``scores``: diverging (``True``) or sequential (``False``).

    ``signed`` if given; else the registered method's ``signed``
    (:func:`registered_signed`); else whether any score is negative.
    """
    if signed is not None:
        return bool(signed)
    declared = registered_signed(method)
    return is_signed(scores) if declared is None else declared


def scale_kind(signed: bool) -> str:
    """``"signed"`` or ``"unsigned"``: the word the legends use for the scale."""
    return "signed" if signed else "unsigned"


def legend_note(signed: bool, below_zero: bool = False, clipped: bool = False) -> str:
    """What the colours mean, for a legend.

    Args:
        signed: The diverging scale (red against, green for the explained class)
            instead of the sequential one (white 0 to the largest score).
        below_zero: Some scores are negative (on the sequential scale they are
            drawn as 0; the note says so).
        clipped: Some tokens (special tokens, the explained token) exceed the
            scale's maximum and are drawn at full colour.
    """
    if signed:
        note = "red: against, green: for the explained class"
    else:
        note = "white 0 to the largest score; low means little support, not evidence against"
        if below_zero:
            note += "; scores below 0 drawn as 0"
    if clipped:
        note += "; special tokens above it shown at full colour"
    return note


def scale_max(scores: Sequence[float], signed: bool) -> float:
    """The score that maps to the full colour: ``max(s)`` or ``max(|s|)`` (0 if empty)."""
    if not scores:
        return 0.0
    return max(abs(s) for s in scores) if signed else max(max(scores), 0.0)


def display_max(words: Sequence[str], scores: Sequence[float], signed: bool, include_special: bool = False,
                explained: int | None = None) -> float:
    """The score that gets the full colour when showing ``words``.

    Special tokens (``[CLS]``, ``<s>`` ...) and the word at index ``explained``
    (the explained token: a decoder's last word) are left out of the maximum
    unless ``include_special``: PageRank methods that teleport to the
    explained token give it most of the mass, which would wash out every
    other colour. Tokens above the maximum are shown at full colour
    (clipped). If no other token has a non-zero score, all tokens count.
    """
    from captum_prxai.viz.tokens import is_special_token

    if not include_special:
        ordinary = [s for i, (w, s) in enumerate(zip(words, scores)) if not is_special_token(w) and i != explained]
        top = scale_max(ordinary, signed)
        if top > 0:
            return top
    return scale_max(scores, signed)


def intensities(scores: Sequence[float], signed: bool, top: float | None = None) -> list[float]:
    """Scores rescaled to ``[-1, 1]`` (signed) or ``[0, 1]`` (sequential).

    The sequential scale divides by the largest score (negative scores clip
    to 0); the diverging scale divides by the largest absolute score. All-zero
    scores map to 0. ``top`` overrides the divisor; values beyond it clip.
    """
    if top is None:
        top = scale_max(scores, signed)
    if top <= 0:
        return [0.0 for _ in scores]
    if signed:
        return [max(-1.0, min(1.0, s / top)) for s in scores]
    return [max(0.0, min(1.0, s / top)) for s in scores]


def _mix(a: RGB, b: RGB, t: float) -> RGB:
    return tuple(int(round(x + (y - x) * t)) for x, y in zip(a, b))  # type: ignore[return-value]


def intensity_rgb(t: float, signed: bool) -> RGB:
    """Colour for one rescaled score ``t`` (see :func:`intensities`)."""
    if signed:
        return _mix(WHITE, POSITIVE_MAX if t >= 0 else NEGATIVE_MAX, min(1.0, abs(t)))
    return _mix(WHITE, SEQUENTIAL_MAX, max(0.0, min(1.0, t)))


def _luminance(c: RGB) -> float:
    def lin(v: int) -> float:
        x = v / 255
        return x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(v) for v in c)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def text_on(bg: RGB) -> RGB:
    """Black or white text, whichever contrasts more with ``bg`` (WCAG contrast ratio)."""
    lum = _luminance(bg)
    return (0, 0, 0) if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else (255, 255, 255)


def css_rgb(c: RGB) -> str:
    return f"rgb({c[0]},{c[1]},{c[2]})"
