"""Turning tokenizer pieces back into readable words.

Tokenizers split words into sub-word pieces. Three marker conventions are
recognised:

* WordPiece (BERT): a piece that *continues* a word starts with ``##``
  (``"play", "##ing"``).
* SentencePiece (T5, ALBERT, XLM-R, Llama): a piece that *starts* a word
  starts with ``▁`` (U+2581).
* Byte-level BPE (GPT-2, RoBERTa): a piece that starts a word (follows a
  space) starts with ``Ġ`` (U+0120); ``Ċ`` stands for a newline.

Special tokens (``[CLS]``, ``<s>``, ``<|endoftext|>`` ...) always stay on
their own.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from captum_prxai.exceptions import PRXAIError
from captum_prxai.viz._colors import to_float_list

SPIECE_MARK = "\u2581"  # ▁
BPE_SPACE = "\u0120"  # Ġ
BPE_NEWLINE = "\u010a"  # Ċ

_SPECIAL = re.compile(
    r"^(\[[A-Z_]+\]"  # [CLS] [SEP] [PAD] [UNK] [MASK]
    r"|<\|[^|<>\s]+\|>"  # <|endoftext|> <|begin_of_text|>
    r"|</?(s|pad|unk|mask|eos|bos|cls|sep|sos|start_of_turn|end_of_turn|extra_id_\d+)>)$"  # <s> </s> <pad> ...
)


def is_special_token(token: str) -> bool:
    """True for tokens such as ``[CLS]``, ``[SEP]``, ``<s>``, ``</s>``, ``<pad>``, ``<|endoftext|>``.

    Text that merely looks like markup (``<script>``, ``<b>``) is not special.
    """
    return bool(_SPECIAL.match(token))


def display_token(token: str) -> str:
    """A token as shown to a reader: SentencePiece / byte-BPE space markers removed.

    WordPiece ``##`` is kept (it tells the reader the piece continues a word).
    A token that is nothing but a marker is shown as the marker itself.
    """
    shown = token
    if shown.startswith(SPIECE_MARK) or shown.startswith(BPE_SPACE):
        shown = shown[1:]
    shown = shown.replace(BPE_NEWLINE, "\u21b5")  # ↵
    return shown if shown else token


def _uses_start_markers(tokens: Sequence[str]) -> bool:
    return any(t.startswith(SPIECE_MARK) or t.startswith(BPE_SPACE) for t in tokens)


def word_groups(tokens: Sequence[str]) -> list[list[int]]:
    """Group token indices into words (see the module docstring for the markers).

    Returns:
        One list of token indices per word, in order; every index appears once.
    """
    groups: list[list[int]] = []
    start_markers = _uses_start_markers(tokens)
    prev_special = True
    for i, tok in enumerate(tokens):
        special = is_special_token(tok)
        if special or prev_special or not groups:
            new_word = True
        elif start_markers:
            new_word = tok.startswith(SPIECE_MARK) or tok.startswith(BPE_SPACE) or tok.startswith(BPE_NEWLINE)
        else:
            new_word = not tok.startswith("##")
        if new_word:
            groups.append([i])
        else:
            groups[-1].append(i)
        prev_special = special
    return groups


def _join(pieces: Sequence[str]) -> str:
    word = ""
    for k, piece in enumerate(pieces):
        if k > 0 and piece.startswith("##"):
            piece = piece[2:]
        word += piece
    return display_token(word) if not is_special_token(word) else word


def merge_subwords(tokens: Sequence[str], scores: Any) -> tuple[list[str], list[float], list[list[int]]]:
    """Merge sub-word pieces into words; a word's score is the **sum** of its pieces' scores.

    Summing keeps the total: for PageRank scores (a probability distribution)
    the merged scores still sum to 1.

    Args:
        tokens: Token strings, as returned by ``tokenizer.convert_ids_to_tokens``.
        scores: One score per token (list, array or tensor of shape ``(T,)``).

    Returns:
        ``(words, word_scores, groups)`` where ``groups[k]`` lists the token
        indices merged into ``words[k]``.

    Raises:
        PRXAIError: if ``tokens`` and ``scores`` differ in length.
    """
    values = to_float_list(scores)
    check_lengths(tokens, values)
    groups = word_groups(tokens)
    words = [_join([tokens[i] for i in g]) for g in groups]
    sums = [float(sum(values[i] for i in g)) for g in groups]
    return words, sums, groups


def check_lengths(tokens: Sequence[str], scores: Sequence[float]) -> None:
    if len(tokens) != len(scores):
        raise PRXAIError(
            f"got {len(tokens)} tokens but {len(scores)} scores; pass exactly one score per token "
            "(drop padding from both, or from neither)."
        )


def explained_word(groups: Sequence[Sequence[int]], position: int | None) -> int | None:
    """Index of the shown word (a group of token positions) that holds token ``position``; ``None`` for none.

    Raises:
        PRXAIError: ``position`` is not an index of the tokens (negative
            indices count from the end).
    """
    if position is None:
        return None
    n = sum(len(g) for g in groups)
    if isinstance(position, bool) or not isinstance(position, int) or not -n <= position < n:
        raise PRXAIError(f"explained_position={position!r} is not a token index (0..{n - 1}).")
    position %= n
    return next(k for k, group in enumerate(groups) if position in group)


def top_words(tokens: Sequence[str], scores: Any, merge: bool = False, k: int = 5,
              explained_position: int | None = None) -> list[tuple[str, float]]:
    """The ``k`` words with the largest ``|score|``, as ``(shown word, score)``, largest first.

    Special tokens are left out, and so is the explained token (a decoder's
    last token, which every PR-XAI walk returns to; see
    :attr:`~captum_prxai.viz.explanation.TextExplanation.explained_position`),
    as the colour scales leave them out. With ``merge`` the sub-word pieces
    are merged first (:func:`merge_subwords`). Empty when no word is left.
    """
    words, values, groups = shown_words(tokens, scores, merge)
    explained = explained_word(groups, explained_position)
    ordinary = [i for i in range(len(values)) if i != explained and not is_special_token(words[i])]
    order = sorted(ordinary, key=lambda i: -abs(values[i]))[:k]
    return [(display_token(words[i]), values[i]) for i in order]


def shown_words(tokens: Sequence[str], scores: Any, merge: bool) -> tuple[list[str], list[float], list[list[int]]]:
    """``(words, scores, groups)`` as a picture shows them: merged into words (:func:`merge_subwords`) or one per token.

    ``groups[k]`` lists the token indices shown as ``words[k]``.

    Raises:
        PRXAIError: if ``tokens`` and ``scores`` differ in length.
    """
    tokens = [str(t) for t in tokens]
    if merge:
        return merge_subwords(tokens, scores)
    values = to_float_list(scores)
    check_lengths(tokens, values)
    return tokens, values, [[i] for i in range(len(tokens))]
