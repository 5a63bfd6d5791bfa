"""Explain one text: classify it, run attribution methods on it, and get the graph a PR-XAI method scored.

This is the library side of ``captum-prxai explain`` (the command only parses
arguments and prints or writes what :func:`explain_text` returns)::

    from captum_prxai.models import load_default
    from captum_prxai.viz.explanation import explain_text

    model, tokenizer = load_default()
    result = explain_text("a gripping, beautifully shot film", model, tokenizer, graph=True)
    result.scores["PR-G"]          # one score per token
    result.graph.adjacency[0]      # the (T, T) graph PageRank ran on for PR-G

The methods are those of the shared registry (:mod:`captum_prxai.methods`),
so ``explain``, the explorer and the benchmark run the same attributions. The
graph comes from :meth:`captum_prxai.PageRankAttribution.attribute_graph`: it
is exactly the graph whose PageRank gives the method's scores, whatever its
edge weight, graph kind, sink and self-loop policy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from captum_prxai._tokenize import EncodedText, encode_text, model_input_limit
from captum_prxai.exceptions import PRXAIError

__all__ = [
    "TextExplanation",
    "default_method",
    "default_methods",
    "explain_text",
    "graph_method",
    "graph_title",
    "walks_phrase",
]


#: What an edge ``i -> j`` weighs, per edge weight (for the graph's title)
_EDGE_WORDS = {
    "attention": "attention A",
    "gradient": "attention gradient dA+",
    "attention_gradient": "attention x gradient (A*dA)+",
    "abs_gradient": "|dA|",
    "abs_attention_gradient": "|A*dA|",
}


def _registry():
    from captum_prxai import methods

    return methods


def default_method(model: Any = None) -> str:
    """Registry name of the method :class:`~captum_prxai.PageRankAttribution` runs with its defaults on ``model``.

    See :func:`captum_prxai.methods.default_method`, the one place it is read from.
    """
    return _registry().default_method(model)


def default_methods(model: Any = None) -> List[str]:
    """What ``explain`` runs without ``--methods``: the default method first, then at most two references
    (:data:`captum_prxai.methods.REFERENCE_METHODS`: the paper's PR-AG and Captum's Integrated Gradients)."""
    registry = _registry()
    first = default_method(model)
    return [first, *[name for name in registry.REFERENCE_METHODS if name != first][:2]]


def graph_method(methods: Sequence[str]) -> str:
    """The method whose graph ``explain --graph`` draws: the first PR-XAI method of ``methods``.

    Raises:
        PRXAIError: None of ``methods`` is a PR-XAI method (the graph view
            shows the graph PageRank ran on; other methods rank no graph).
    """
    registry = _registry()
    for name in methods:
        if registry.resolve_method(name).family == "pr-xai":
            return registry.resolve_method(name).name
    pr = [name for name in default_methods() if registry.resolve_method(name).family == "pr-xai"]
    given = ",".join(methods)
    raise PRXAIError(
        f"the graph view is for PR-XAI methods (it draws the graph PageRank ran on), and --methods {given} has "
        f"none; add {', '.join(pr[:-1])} or {pr[-1]} (e.g. --methods {','.join([pr[0], *methods])})."
    )


def graph_title(label: str, graph: Any) -> str:
    """Title of the drawing of ``graph`` (a :class:`~captum_prxai.GraphExplanation`) scored by ``label``."""
    spec = getattr(graph, "spec", None)
    edge = getattr(spec, "edge_weight", None)
    words = _EDGE_WORDS.get(edge, "custom edge weights") if edge is not None else "edge weights"
    damping = getattr(graph, "damping", None)
    damping = f" (damping {float(damping):g})" if isinstance(damping, (int, float)) else ""
    title = f"{label}: the graph PageRank ran on{damping}\nedges: {words} (i -> j: token i attends to j)"
    if getattr(graph, "negative_adjacency", None) is not None:
        title += f"\npositive walk drawn; {walks_phrase(graph)}"
    elif _walk_rank(graph) != "PageRank":
        title += f"\nscores: the walk's {_walk_rank(graph)}"
    weight = float(getattr(spec, "relevance_weight", 0.0) or 0.0)
    if weight:
        times = "" if weight == 1.0 else f"{weight:g} "
        title += f"\neach token's score times 1 + {times}R/max|R| (R: its gradient x input, the same pass)"
    return title


def walks_phrase(graph: Any, index: int = 0) -> str:
    """How example ``index`` of ``graph`` (a :class:`~captum_prxai.GraphExplanation` that walks both signs)
    combines its two walks into scores, in words, for the titles of its pictures."""
    agreed = graph.gate_kept_positive
    rank = _walk_rank(graph)
    if agreed is not None and bool(agreed[index]):
        return (f"the two walks agree (correlation above {float(graph.spec.walk_gate):g}), so the scores are the "
                f"positive walk's {rank} alone")
    weight = float(graph.walk_weights[index])
    times = "" if weight == 1.0 else f"{weight:g} x "
    return f"the scores are the positive walk's {rank} minus {times}the negative walk's"


def _walk_rank(graph: Any) -> str:
    """What a walk of ``graph`` contributes to the scores, in words: its PageRank, weighed by the graph's hubs
    where the spec's ``hub_power`` is set."""
    power = float(getattr(getattr(graph, "spec", None), "hub_power", 0.0) or 0.0)
    return "PageRank" if not power else f"PageRank x its graph's global PageRank^{power:g} (hubs)"


@dataclass
class TextExplanation:
    """One text, its prediction and the token scores of each method.

    Attributes:
        text: The text.
        tokens: The ``T`` token strings (special tokens included).
        label_names: Class names.
        probabilities: Predicted probability of each class.
        predicted: Predicted class index.
        target: Class index explained.
        truncated: Whether the text was cut to the model's limit.
        scores: Method label -> one score per token.
        seconds: Method label -> wall time of its attribution.
        unknown: Positions of tokens the tokenizer does not know (``[UNK]``).
        graph: With ``graph=True``: the :class:`~captum_prxai.GraphExplanation`
            of :attr:`graph_label` (``adjacency[0]``: the graph PageRank ran on).
        graph_label: Label of the method whose graph :attr:`graph` is.
        encoded: The tokenised input.
        explained_position: Index of the token whose output is explained: the
            first token (``[CLS]``) for encoders, the last for decoders
            (:func:`captum_prxai.capture.target_positions`). The renderers
            leave it out of their colour scales.
    """

    text: str
    tokens: List[str]
    label_names: List[str]
    probabilities: List[float]
    predicted: int
    target: int
    truncated: bool
    scores: Dict[str, List[float]] = field(default_factory=dict)
    seconds: Dict[str, float] = field(default_factory=dict)
    unknown: List[int] = field(default_factory=list)
    graph: Any = field(default=None, repr=False)
    graph_label: Optional[str] = None
    encoded: Optional[EncodedText] = field(default=None, repr=False)
    explained_position: Optional[int] = None

    @property
    def all_unknown(self) -> bool:
        """Whether every token of the text (special tokens aside) is unknown to the tokenizer."""
        if not self.unknown or self.encoded is None:
            return False
        return len(self.unknown) == int((self.encoded.special_tokens_mask[0] == 0).sum())

    def to_dict(self) -> Dict[str, Any]:
        """The JSON-ready fields (all but :attr:`graph` and :attr:`encoded`)."""
        return {
            "text": self.text, "tokens": self.tokens, "label_names": self.label_names,
            "probabilities": self.probabilities, "predicted": self.predicted, "target": self.target,
            "truncated": self.truncated, "scores": self.scores, "seconds": self.seconds,
            "unknown": self.unknown, "explained_position": self.explained_position,
        }


def _encode(text: str, model: Any, tokenizer: Any, truncate: bool) -> EncodedText:
    if not isinstance(text, str) or not text.strip():
        raise PRXAIError('the text is empty; give the sentence to explain, e.g. captum-prxai explain "a moving film".')
    encoded = encode_text(
        tokenizer, text, model_input_limit(model, tokenizer), truncate,
        lambda length, limit: PRXAIError(
            f"the text has {length} tokens but this model accepts at most {limit}; shorten it, "
            "or pass --truncate to explain only its first tokens."
        ),
    )
    if not bool((encoded.special_tokens_mask[0] == 0).any()):
        raise PRXAIError(
            f"the text {text[:40]!r} gives no tokens once tokenised (only {' '.join(encoded.tokens) or 'nothing'}); "
            "there is nothing to explain. Give a text in words."
        )
    return encoded


def _unknown_positions(encoded: EncodedText, tokenizer: Any) -> List[int]:
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None:
        return []
    ids, special = encoded.input_ids[0].tolist(), encoded.special_tokens_mask[0].tolist()
    return [i for i, (t, s) in enumerate(zip(ids, special)) if t == unk and not s]


def explain_text(
    text: str,
    model: Any,
    tokenizer: Any,
    methods: Optional[Sequence[str]] = None,
    *,
    target: Optional[int] = None,
    truncate: bool = False,
    graph: bool = False,
    context: Any = None,
) -> TextExplanation:
    """Classify ``text`` and run each attribution method on it.

    Args:
        text: The text to explain.
        model: A sequence classifier (``model(input_ids=..., attention_mask=...).logits``).
        tokenizer: Its tokenizer.
        methods: Registry names or aliases (default: :func:`default_methods` of the model).
        target: Class to explain (default: the predicted class).
        truncate: Cut a text longer than the model's limit instead of refusing it.
        graph: Also return the graph the first PR-XAI method of ``methods``
            scored (see :func:`graph_method`), from
            :meth:`~captum_prxai.PageRankAttribution.attribute_graph`.
        context: A :class:`~captum_prxai.methods.MethodContext` (default: from the tokenizer).

    Returns:
        A :class:`TextExplanation`.

    Raises:
        PRXAIError: empty text, a text with no tokens, a text too long
            (without ``truncate``), a target out of range, an unknown method,
            or ``graph`` without a PR-XAI method.
    """
    import torch

    registry = _registry()
    methods = registry.parse_methods(list(methods) if methods is not None else default_methods(model))
    drawn = graph_method(methods) if graph else None
    encoded = _encode(text, model, tokenizer, truncate)
    input_ids, attention_mask, special = encoded.input_ids, encoded.attention_mask, encoded.special_tokens_mask

    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    probs = torch.softmax(logits.double(), -1)[0]
    classes = probs.shape[0]
    predicted = int(probs.argmax())
    if target is None:
        target = predicted
    if isinstance(target, bool) or not isinstance(target, int) or not 0 <= target < classes:
        raise PRXAIError(f"--target {target} is out of range: this model has {classes} classes (0..{classes - 1}).")

    from captum_prxai.capture import model_is_causal, target_positions
    from captum_prxai.models import label_names

    result = TextExplanation(
        text=text, tokens=list(encoded.tokens), label_names=label_names(model, classes),
        probabilities=[float(p) for p in probs.tolist()], predicted=predicted, target=target,
        truncated=encoded.truncated, unknown=_unknown_positions(encoded, tokenizer), encoded=encoded,
        explained_position=int(target_positions(attention_mask.bool(), model_is_causal(model))[0]),
    )
    forward_func = registry.make_forward_func(model)
    context = context or registry.MethodContext.from_tokenizer(tokenizer)
    target_tensor = torch.tensor([target])
    for name in methods:
        explainer = registry.build_method(name, model, forward_func, context)
        start = time.perf_counter()
        out = explainer(input_ids, attention_mask, special, target_tensor)
        result.seconds[explainer.label] = time.perf_counter() - start
        result.scores[explainer.label] = [float(v) for v in out[0].tolist()]
        if name == drawn:
            result.graph = explainer.attribution.attribute_graph(
                input_ids, target=target_tensor, additional_forward_args=(attention_mask,),
                attention_mask=attention_mask,
            )
            result.graph_label = explainer.label
    return result
