"""Signed means signed: do a method's scores go negative for evidence against the explained class?

A measured set of contrast sentences (movie-review sentiment, written for this check), each mixing
words that speak for the positive class with words that speak for the negative class, e.g. "great
cast but a boring, predictable plot". Every sentence is explained twice, once per class. Explaining
"positive", the positive words are the evidence FOR the explained class and the negative words the
evidence AGAINST it; explaining "negative", the roles swap.

Model: the embedded default classifier (MiniLM-L6 fine-tuned on movie-review sentences). Scores are
summed over a word's sub-word pieces; special tokens are left out. Per method the script reports:

* ``against < 0``: the share of AGAINST words whose score is negative (below 0; an exact 0 is not);
* ``for > 0``: the share of FOR words whose score is positive;
* ``bottom-k < 0``: of the k lowest-scored words of each explanation (k = its number of AGAINST
  words), the share whose score is negative: are the bottom-ranked words negative scores?
* ``words < 0``: the share of all words (special tokens aside) with a negative score;
* ``against in bottom-k``: the share of AGAINST words among those k lowest-scored words;
* ``rank against`` / ``rank for``: the mean rank of the AGAINST / FOR words within their sentence,
  0 = the highest score, 1 = the lowest (ties share their mean rank).

Methods (public API only): the default, ``PageRankAttribution(forward, attention_layers(model))``
with every option left to its default; three explicitly signed PR-TAG± variants: the default's two
walks without the relevance weight (``relevance_weight=0``), the two walks at equal weight
(``negative_weight=1.0, relevance_weight=0``), and the single walk given the sign of gradient x
input (``signed=True``); as references, Captum's LayerIntegratedGradients and Input x Gradient
(LayerGradientXActivation) on the word embeddings, run as the benchmark runs them (50 Gauss-Legendre
steps; every real token replaced by the padding token in IG's baseline; the target logit).

    python benchmarks/signed_contrast.py --out benchmarks/results/signed_contrast.md
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

RESULTS = Path(__file__).resolve().parent / "results"
COMMAND = "python benchmarks/signed_contrast.py --out benchmarks/results/signed_contrast.md"

#: (sentence, positive-sentiment words, negative-sentiment words). Every annotated word occurs once in
#: its sentence, as the uncased tokenizer's word (sub-word pieces merged). Unannotated words are neutral.
SENTENCES: Tuple[Tuple[str, Tuple[str, ...], Tuple[str, ...]], ...] = (
    ("great cast but a boring, predictable plot", ("great",), ("boring", "predictable")),
    ("a dull, badly acted film with a brilliant score", ("brilliant",), ("dull", "badly")),
    ("beautiful photography cannot save the tedious script", ("beautiful",), ("tedious",)),
    ("the acting is superb, the story is weak", ("superb",), ("weak",)),
    ("a charming lead in a clumsy, overlong movie", ("charming",), ("clumsy", "overlong")),
    ("funny dialogue, awful pacing", ("funny",), ("awful",)),
    ("a gorgeous, moving drama with a silly ending", ("gorgeous", "moving"), ("silly",)),
    ("the effects are stunning but the characters are flat", ("stunning",), ("flat",)),
    ("an excellent premise ruined by lazy writing", ("excellent",), ("ruined", "lazy")),
    ("a wonderful soundtrack and a terrible script", ("wonderful",), ("terrible",)),
    ("clever jokes, but the plot is a mess", ("clever",), ("mess",)),
    ("a powerful performance in a forgettable film", ("powerful",), ("forgettable",)),
    ("the director is talented, the result is disappointing", ("talented",), ("disappointing",)),
    ("a fresh idea with a painfully slow middle", ("fresh",), ("painfully", "slow")),
    ("delightful actors stuck in a pointless story", ("delightful",), ("pointless",)),
    ("smart and witty, yet strangely lifeless", ("smart", "witty"), ("lifeless",)),
    ("an ugly, cheap production with one lovely scene", ("lovely",), ("ugly", "cheap")),
    ("the cast is fantastic and the plot is stupid", ("fantastic",), ("stupid",)),
    ("a bland story told with impressive style", ("impressive",), ("bland",)),
    ("the script is awkward, the music is beautiful", ("beautiful",), ("awkward",)),
    ("a thrilling first hour and a boring second", ("thrilling",), ("boring",)),
    ("heartfelt, sincere and utterly predictable", ("heartfelt", "sincere"), ("predictable",)),
    ("an amazing villain in an otherwise weak thriller", ("amazing",), ("weak",)),
    ("the jokes are lame but the heart is genuine", ("genuine",), ("lame",)),
    ("a messy, confusing plot with superb acting", ("superb",), ("messy", "confusing")),
    ("entertaining enough, though the ending is stupid", ("entertaining",), ("stupid",)),
    ("the performances are strong, the dialogue is terrible", ("strong",), ("terrible",)),
    ("an ambitious film that feels hollow", ("ambitious",), ("hollow",)),
    ("a sweet, gentle comedy with a few awful jokes", ("sweet", "gentle"), ("awful",)),
    ("boring characters in a beautifully shot world", ("beautifully",), ("boring",)),
    ("the story is original but the acting is wooden", ("original",), ("wooden",)),
    ("a touching tale spoiled by a cheesy score", ("touching",), ("spoiled", "cheesy")),
    ("the visuals are brilliant, everything else is dull", ("brilliant",), ("dull",)),
    ("a gripping start and a ridiculous finale", ("gripping",), ("ridiculous",)),
    ("an enjoyable cast wasted on a poor script", ("enjoyable",), ("wasted", "poor")),
    ("the humor is sharp but the romance is tiresome", ("sharp",), ("tiresome",)),
    ("a bad film with a good message", ("good",), ("bad",)),
    ("a good film with a bad ending", ("good",), ("bad",)),
    ("terrific action, horrible dialogue", ("terrific",), ("horrible",)),
    ("a lovely, warm story with an annoying hero", ("lovely", "warm"), ("annoying",)),
    ("the plot is clever, the pacing is sluggish", ("clever",), ("sluggish",)),
    ("an unpleasant, cynical movie with a fine cast", ("fine",), ("unpleasant", "cynical")),
    ("a masterful director makes a shallow film", ("masterful",), ("shallow",)),
    ("the lead is brilliant and the supporting cast is awful", ("brilliant",), ("awful",)),
    ("a fun ride with a stupid twist", ("fun",), ("stupid",)),
    ("the film is inspiring yet frustratingly uneven", ("inspiring",), ("frustratingly", "uneven")),
    ("a pretty but empty film", ("pretty",), ("empty",)),
    ("wonderful performances, but the movie is a bore", ("wonderful",), ("bore",)),
    ("a dreadful remake with one great song", ("great",), ("dreadful",)),
    ("the characters are likable and the story is pointless", ("likable",), ("pointless",)),
    # the example: only evidence for "negative"
    ("a dull, badly acted film with a boring script", (), ("dull", "badly", "boring")),
)

#: The columns of the table, in order: (key, header)
COLUMNS: Tuple[Tuple[str, str], ...] = (
    ("against_negative", "against < 0"),
    ("for_positive", "for > 0"),
    ("bottom_negative", "bottom-k < 0"),
    ("words_negative", "words < 0"),
    ("against_in_bottom", "against in bottom-k"),
    ("rank_against", "rank against"),
    ("rank_for", "rank for"),
)


@dataclass
class Case:
    """One explanation: a sentence's words, one method's scores for one class, and the words' roles.

    Attributes:
        method: Method label.
        sentence: The sentence.
        explained: Name of the explained class.
        predicted: Whether the explained class is the model's prediction.
        words: The sentence's words (special tokens left out, sub-word pieces merged).
        scores: One score per word (the sum of its pieces').
        for_words: Indices (into ``words``) of the evidence for the explained class.
        against_words: Indices of the evidence against it.
    """

    method: str
    sentence: str
    explained: str
    predicted: bool
    words: List[str]
    scores: List[float]
    for_words: List[int]
    against_words: List[int]


def _ranks(scores: Sequence[float]) -> List[float]:
    """Rank of each score within ``scores``, 0 = highest, 1 = lowest, ties sharing their mean rank."""
    n = len(scores)
    if n < 2:
        return [0.0] * n
    out = []
    for s in scores:
        above = sum(1 for t in scores if t > s)
        ties = sum(1 for t in scores if t == s) - 1
        out.append((above + ties / 2) / (n - 1))
    return out


def _bottom(scores: Sequence[float], k: int) -> List[int]:
    """Indices of the ``k`` lowest scores (the earlier word first among equal scores)."""
    return sorted(range(len(scores)), key=lambda i: (scores[i], i))[:k]


def case_counts(case: Case) -> Dict[str, Tuple[float, int]]:
    """The per-explanation parts of every column: ``{column: (sum, count)}``.

    The table's value of a column is the sum of the sums over the sum of the counts (pooled over words
    or explanations, not averaged per sentence).
    """
    s = case.scores
    ranks = _ranks(s)
    k = len(case.against_words)
    bottom = _bottom(s, k)
    against = set(case.against_words)
    return {
        "against_negative": (sum(1.0 for i in case.against_words if s[i] < 0), k),
        "for_positive": (sum(1.0 for i in case.for_words if s[i] > 0), len(case.for_words)),
        "bottom_negative": (sum(1.0 for i in bottom if s[i] < 0), len(bottom)),
        "words_negative": (sum(1.0 for v in s if v < 0), len(s)),
        "against_in_bottom": (sum(1.0 for i in bottom if i in against), len(bottom)),
        "rank_against": (sum(ranks[i] for i in case.against_words), k),
        "rank_for": (sum(ranks[i] for i in case.for_words), len(case.for_words)),
    }


def summarise(cases: Sequence[Case]) -> Dict[str, Dict[str, Optional[float]]]:
    """Pool the cases per method: ``{method: {column: value or None (nothing to count), "n": explanations}}``.

    Methods keep the order in which they first appear in ``cases``.
    """
    totals: Dict[str, Dict[str, List[float]]] = {}
    for case in cases:
        acc = totals.setdefault(case.method, {key: [0.0, 0.0] for key, _ in COLUMNS} | {"n": [0.0, 0.0]})
        for key, (total, count) in case_counts(case).items():
            acc[key][0] += total
            acc[key][1] += count
        acc["n"][0] += 1
    return {
        method: {key: (acc[key][0] / acc[key][1] if acc[key][1] else None) for key, _ in COLUMNS}
        | {"n": int(acc["n"][0])}
        for method, acc in totals.items()
    }


def _fmt(value: Optional[float], rank: bool) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if rank else f"{100 * value:.0f}%"


def markdown_table(summary: Mapping[str, Mapping[str, Optional[float]]]) -> str:
    """The summary as a markdown table: one row per method, shares in percent, ranks in [0, 1]."""
    head = "| method | n | " + " | ".join(header for _, header in COLUMNS) + " |"
    rule = "|---|---:|" + "---:|" * len(COLUMNS)
    rows = [
        f"| {method} | {values['n']} | "
        + " | ".join(_fmt(values[key], key.startswith("rank")) for key, _ in COLUMNS) + " |"
        for method, values in summary.items()
    ]
    return "\n".join([head, rule, *rows])


def annotate(words: Sequence[str], sentence: str, for_words: Sequence[str],
             against_words: Sequence[str]) -> Tuple[List[int], List[int]]:
    """Indices (into ``words``) of the annotated words.

    Raises:
        ValueError: if an annotated word is not exactly once among ``words``.
    """
    def find(word: str) -> int:
        hits = [i for i, w in enumerate(words) if w == word]
        if len(hits) != 1:
            raise ValueError(f"{word!r} is {len(hits)} times among the words of {sentence!r} ({words}); "
                             "annotate a word that occurs once.")
        return hits[0]

    return [find(w) for w in for_words], [find(w) for w in against_words]


def _methods(model) -> Dict[str, Callable]:
    """Method label -> ``explain(input_ids, attention_mask, target) -> (T,) scores``."""
    from captum.attr import LayerGradientXActivation, LayerIntegratedGradients

    import captum_prxai
    from captum_prxai.methods import IG_DEFAULTS

    def forward(input_ids, attention_mask):
        return model(input_ids, attention_mask=attention_mask).logits

    layers = captum_prxai.attention_layers(model)

    def pagerank(**options):
        pr = captum_prxai.PageRankAttribution(forward, layers, **options)

        def explain(ids, mask, target):
            return pr.attribute(ids, target=target, additional_forward_args=(mask,), attention_mask=mask)[0]

        return explain

    embeddings = model.get_input_embeddings()
    lig = LayerIntegratedGradients(forward, embeddings)
    ixg = LayerGradientXActivation(forward, embeddings)
    pad = int(model.config.pad_token_id or 0)

    def ig(ids, mask, target):
        base = ids.clone()
        base[0, 1:-1] = pad  # every real token; [CLS] and [SEP] kept
        out = lig.attribute(ids, baselines=base, target=target, additional_forward_args=(mask,), **IG_DEFAULTS)
        return out[0].sum(-1)

    def input_x_gradient(ids, mask, target):
        return ixg.attribute(ids, target=target, additional_forward_args=(mask,))[0].sum(-1)

    return {
        "PR-XAI default": pagerank(),
        "PR-TAG± (λ=0.25), no relevance weight": pagerank(relevance_weight=0.0),
        "PR-TAG± (λ=1), no relevance weight": pagerank(negative_weight=1.0, relevance_weight=0.0),
        "PR-TAG (one walk), signed=True": pagerank(signed=True),
        "Integrated Gradients (Captum LIG)": ig,
        "Input x Gradient": input_x_gradient,
    }


def run_cases(sentences=SENTENCES) -> List[Case]:
    """Explain every sentence for both classes with every method; the cases in method order."""
    import torch

    from captum_prxai.models import load_default
    from captum_prxai.viz.tokens import is_special_token, merge_subwords

    model, tokenizer = load_default()
    model.eval()
    labels = {i: model.config.id2label[i] for i in range(model.config.num_labels)}
    positive = next(i for i, name in labels.items() if name.lower().startswith("pos"))
    methods = _methods(model)
    cases: Dict[str, List[Case]] = {name: [] for name in methods}
    for sentence, pos_words, neg_words in sentences:
        enc = tokenizer([sentence], return_tensors="pt")
        ids, mask = enc["input_ids"], enc["attention_mask"]
        tokens = tokenizer.convert_ids_to_tokens(ids[0])
        with torch.no_grad():
            predicted = int(model(ids, attention_mask=mask).logits[0].argmax())
        for target in labels:
            for_w, against_w = (pos_words, neg_words) if target == positive else (neg_words, pos_words)
            for name, explain in methods.items():
                scores = explain(ids, mask, torch.tensor([target])).detach().double()
                words, values, _ = merge_subwords(tokens, scores)
                kept = [i for i, w in enumerate(words) if not is_special_token(w)]
                words, values = [words[i] for i in kept], [values[i] for i in kept]
                f_idx, a_idx = annotate(words, sentence, for_w, against_w)
                cases[name].append(Case(name, sentence, labels[target], target == predicted, words, values,
                                        f_idx, a_idx))
    return [case for name in methods for case in cases[name]]


def _example(cases: Sequence[Case], method: str, sentence: str) -> str:
    lines = []
    for case in cases:
        if case.method == method and case.sentence == sentence:
            shown = ", ".join(f"{w} {v:+.3f}" for w, v in zip(case.words, case.scores))
            lines.append(f"* explaining **{case.explained}**: {shown}")
    return "\n".join(lines)


def report(cases: Sequence[Case]) -> str:
    """The markdown report: the table over every explanation, split by whether the explained class is the
    prediction, and the issue's example sentence under the default."""
    n_sent = len({c.sentence for c in cases})
    parts = [
        "# Signed means signed: contrast sentences",
        "",
        f"{n_sent} contrast sentences written for this check (`benchmarks/signed_contrast.py`), each explained for "
        "both classes by the embedded default classifier (MiniLM-L6, movie-review sentences): n = explanations per "
        "method. FOR / AGAINST: the words annotated as evidence for / against the explained class. Word scores are "
        "the sums of their sub-word pieces; special tokens left out. Shares are pooled over words; ranks are "
        "within the sentence, 0 = highest score, 1 = lowest; bottom-k: the k lowest-scored words of an "
        "explanation, k its number of AGAINST words.",
        "",
        "## All explanations",
        "",
        markdown_table(summarise(cases)),
        "",
        "## Explaining the predicted class",
        "",
        markdown_table(summarise([c for c in cases if c.predicted])),
        "",
        "## Explaining the other class",
        "",
        markdown_table(summarise([c for c in cases if not c.predicted])),
        "",
        "## The issue's example under the default",
        "",
        _example(cases, "PR-XAI default", SENTENCES[-1][0]),
        "",
        f"Command: `{COMMAND}`",
        "",
    ]
    return "\n".join(parts)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="also write the markdown report here")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: %(default)s)")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    text = report(run_cases())
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
