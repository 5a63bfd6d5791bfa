"""Captum ``VisualizationDataRecord`` objects for :func:`captum.attr.visualization.visualize_text`.

Captum's text visualiser colours each word by a value that it clips to
``[-1, 1]``. PR-XAI scores are a PageRank probability distribution:
non-negative, summing to 1, so every score is tiny for long texts and would
be almost white. The records made here therefore **rescale** the scores:

* non-negative scores are divided by their maximum, so the top token is
  ``1.0`` (full green) and the others keep their ratios to it;
* signed scores are divided by their largest absolute value, so they land in
  ``[-1, 1]`` with signs kept.

Special tokens (``[CLS]``, ``[SEP]``, ``<s>`` ...) are left out of that
maximum by default: PageRank methods that teleport to the explained ``[CLS]``
token give it most of the mass, which would wash out every other word. Their
rescaled value may then exceed 1; ``visualize_text`` clips it to full colour.
Pass ``scale_special_tokens=True`` to divide by the maximum over all tokens.

``attr_score`` keeps the *sum of the raw scores* (1.0 for PageRank), and
tokens are HTML-escaped, since ``visualize_text`` writes them into HTML as is.
"""

from __future__ import annotations

import html
from typing import Any, Mapping, Sequence

from captum_prxai.exceptions import PRXAIError
from captum_prxai.viz import _colors
from captum_prxai.viz.tokens import check_lengths, merge_subwords as _merge

__all__ = ["to_visualization_records", "rescale_scores"]


def rescale_scores(scores: Any, signed: bool | None = None, tokens: Sequence[str] | None = None) -> list[float]:
    """Divide scores by their maximum (``signed``: by their maximum absolute value).

    All-zero scores stay zero. With ``signed=False``, negative scores are kept
    (divided by the positive maximum) so Captum can still colour them red.
    If ``tokens`` are given, special tokens do not count towards the maximum
    (unless no other token has a non-zero score).
    """
    values = _colors.to_float_list(scores)
    if signed is None:
        signed = _colors.is_signed(values)
    if tokens is not None:
        check_lengths(tokens, values)
        top = _colors.display_max(tokens, values, signed)
    else:
        top = _colors.scale_max(values, signed)
    if top <= 0:
        return [0.0 for _ in values]
    return [v / top for v in values]


def _rows(scores: Any) -> list[Any]:
    if hasattr(scores, "detach"):
        scores = scores.detach().cpu()
    dims = getattr(scores, "ndim", None)
    if dims is None:
        seq = list(scores)
        dims = 2 if seq and isinstance(seq[0], (list, tuple)) or (seq and hasattr(seq[0], "__len__")) else 1
    if dims == 1:
        return [scores]
    if dims == 2:
        return [row for row in scores]
    raise PRXAIError(f"scores must have shape (T,) or (B, T); got {dims} dimensions.")


def _per_row(value: Any, n: int, name: str) -> list[Any]:
    if value is None or isinstance(value, (str, int, float)):
        return [value] * n
    if hasattr(value, "tolist"):
        value = value.tolist()
        if not isinstance(value, list):
            return [value] * n
    value = list(value)
    if len(value) != n:
        raise PRXAIError(f"{name} has {len(value)} entries but there are {n} examples.")
    return value


def to_visualization_records(
    tokens: Sequence[str] | Sequence[Sequence[str]],
    scores: Any,
    *,
    pred_class: Any,
    pred_prob: Any,
    true_class: Any = None,
    attr_class: Any = None,
    convergence_score: Any = None,
    merge_subwords: bool = False,
    signed: bool | None = None,
    scale_special_tokens: bool = False,
) -> list:
    """Build records for :func:`captum.attr.visualization.visualize_text`.

    Scores are rescaled (see the module docstring): by the maximum for
    non-negative scores (top token -> 1.0), by the maximum absolute value for
    signed ones. ``attr_score`` is the sum of the raw (merged) scores.

    Args:
        tokens: Tokens of one example (``list[str]``) or of a batch
            (``list[list[str]]``).
        scores: ``(T,)`` scores for one example or ``(B, T)`` for a batch
            (tensor, array or nested lists); or a mapping ``method -> scores``
            for one example, giving one record per method with
            ``attr_class`` set to the method name.
        pred_class: Predicted class (name or index), one value or one per example.
        pred_prob: Probability of the predicted class, one value or one per example.
        true_class: True class; default: the predicted class.
        attr_class: The class the attributions explain; default: the predicted class.
        convergence_score: Passed through to the record (default 0.0; unused
            by PageRank methods).
        merge_subwords: Merge sub-word pieces into words, summing scores.
        signed: Force the rescaling mode; default: signed if any score < 0.
        scale_special_tokens: Let special tokens set the maximum (default:
            they do not; see the module docstring).

    Returns:
        A list of ``captum.attr.visualization.VisualizationDataRecord``.

    Raises:
        PRXAIError: if shapes do not match.
    """
    import torch
    from captum.attr import visualization as _captum_viz

    VisualizationDataRecord = _captum_viz.VisualizationDataRecord

    if isinstance(scores, Mapping):
        if not tokens or not isinstance(tokens[0], str):
            raise PRXAIError("with a mapping of method -> scores, pass the tokens of a single example.")
        names = list(scores)
        token_rows = [list(tokens)] * len(names)
        score_rows = [scores[n] for n in names]
        attr_classes = names if attr_class is None else _per_row(attr_class, len(names), "attr_class")
    else:
        score_rows = _rows(scores)
        if tokens and isinstance(tokens[0], str):
            token_rows = [list(tokens)]
        else:
            token_rows = [list(t) for t in tokens]
        if len(token_rows) != len(score_rows):
            raise PRXAIError(f"got tokens for {len(token_rows)} examples but scores for {len(score_rows)}.")
        attr_classes = _per_row(attr_class, len(score_rows), "attr_class")
    n = len(score_rows)
    pred_classes = _per_row(pred_class, n, "pred_class")
    pred_probs = _per_row(pred_prob, n, "pred_prob")
    true_classes = _per_row(true_class, n, "true_class")
    conv = _per_row(convergence_score, n, "convergence_score")

    records = []
    for i in range(n):
        toks = [str(t) for t in token_rows[i]]
        if merge_subwords:
            toks, values, _ = _merge(toks, score_rows[i])
        else:
            values = _colors.to_float_list(score_rows[i])
            check_lengths(toks, values)
        rescaled = rescale_scores(values, signed, None if scale_special_tokens else toks)
        records.append(
            VisualizationDataRecord(
                torch.tensor(rescaled, dtype=torch.float64),
                float(pred_probs[i]),
                pred_classes[i],
                true_classes[i] if true_classes[i] is not None else pred_classes[i],
                attr_classes[i] if attr_classes[i] is not None else pred_classes[i],
                float(sum(values)),
                [html.escape(t, quote=True) for t in toks],
                float(conv[i]) if conv[i] is not None else 0.0,
            )
        )
    return records
