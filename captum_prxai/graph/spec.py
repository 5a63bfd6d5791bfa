"""One description of a PR-XAI graph, and the one function that builds it.

Every consumer of PR-XAI (``PageRankAttribution.attribute``,
``attribute_long``, the explorer's graph view, ``explain --graph``, the
benchmark, the LLM wrapper and the dataset runner) turns a captured pass into
scores through the same three steps of this module:

1. :meth:`GraphSpec.edge_map` turns each layer's per-head attention ``A``
   and gradient ``dA`` into a head-reduced ``(B, T, T)`` edge map (called by
   the capture hooks as each layer's maps arrive);
2. :func:`build_graph` turns the captured maps into the graph PageRank runs
   on (the token adjacency, or the layered transitions) and its teleport
   vector;
3. :func:`score_graph` runs PageRank on it and returns the token scores.

So a picture drawn from a :class:`BuiltGraph` is always the graph the scores
came from: ``score_graph(spec, built)`` reproduces them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

import torch
from torch import Tensor

from captum_prxai.exceptions import PRXAIError
from captum_prxai.graph.builders import (
    GRAPHS,
    TELEPORTS,
    drop_self_loops,
    drop_sink_edges,
    layered_transitions,
    teleport_vector,
    token_graph,
)
from captum_prxai.graph.edges import HEAD_REDUCTIONS, EdgeWeight, edge_weight_fn, reduce_heads
from captum_prxai.graph.pagerank import layered_pagerank, pagerank

if TYPE_CHECKING:  # pragma: no cover
    from captum_prxai.capture import CapturedGraph

__all__ = [
    "DEFAULT_DAMPING",
    "DEFAULT_EDGE_WEIGHT",
    "BuiltGraph",
    "GraphSpec",
    "DEEP_ENCODER_ATTENTION_POWER",
    "DEEP_ENCODER_LAYERS",
    "DEEP_ENCODER_WALK_GATE",
    "DEFAULT_ATTENTION_POWER",
    "ENCODER_NEGATIVE_WEIGHT",
    "auto_attention_power",
    "auto_negative_weight",
    "auto_walk_gate",
    "auto_hub_power",
    "ENCODER_HUB_POWER",
    "ENCODER_PROPAGATION",
    "ENCODER_RELEVANCE_WEIGHT",
    "auto_objective",
    "auto_propagation",
    "auto_relevance_weight",
    "AUTO_OBJECTIVE",
    "hub_weighted",
    "combine_walks",
    "token_walks",
    "auto_walks",
    "build_graph",
    "has_negative_walk",
    "layer_edge_map",
    "relevance_weighted",
    "score_graph",
    "token_adjacency",
    "token_layer",
    "walk_correlation",
    "walk_weights",
]

#: Default PageRank damping, chosen by the ablation in docs/benchmarks.md (0.5-0.95 tried).
DEFAULT_DAMPING = 0.7
#: Default edge weight of :class:`~captum_prxai.PageRankAttribution`: ``(A^0.5 ⊙ dA)⁺``, the edges of PR-TAG,
#: chosen by the worst-case rule over the tune cells (docs/default_search.md).
DEFAULT_EDGE_WEIGHT = "tempered_attention_gradient"

_POLICIES = ("auto", "keep", "drop")
#: the walks of a PR-XAI graph: the positive edges only, or both signs (scores = positive - negative PageRank)
WALKS = ("positive", "both")
#: edge weights with a negative walk (``W(A, -dA)``: the part of the gradient that argues against the target)
_SIGNED_EDGES = ("gradient", "attention_gradient", "tempered_attention_gradient")


def has_negative_walk(edge_weight: Union[str, EdgeWeight], graph: str = "token", signed: bool = False) -> bool:
    """Whether a ``walks="auto"`` rule may walk both signs: a built-in gradient edge weight, the token graph, unsigned.

    (A callable edge weight gets the negative walk ``W(A, -dA)`` only when asked for, ``walks="both"``.)
    """
    return isinstance(edge_weight, str) and _no_negative_walk(edge_weight, graph, signed) is None


def _no_negative_walk(edge_weight: Union[str, EdgeWeight], graph: str, signed: bool) -> Optional[str]:
    """Why ``walks="both"`` cannot be walked with these options (the refusal's message), or ``None``."""
    if isinstance(edge_weight, str) and edge_weight not in _SIGNED_EDGES:
        return (f"walks='both' walks the negative edges W(A, -dA) too, which edge_weight={edge_weight!r} "
                f"does not have; use one of {list(_SIGNED_EDGES)} or a callable.")
    if graph != "token":
        return "walks='both' is for the token graph (graph='token')."
    if signed:
        return "walks='both' already gives signed scores; leave signed=False."
    return None


def auto_walks(edge_weight: Union[str, EdgeWeight] = DEFAULT_EDGE_WEIGHT, graph: str = "token",
               signed: bool = False) -> str:
    """The walks ``walks="auto"`` resolves to: both signs wherever the edges have a negative walk.

    ``"both"`` for a built-in gradient edge weight on the unsigned token graph
    (:func:`has_negative_walk`), ``"positive"`` otherwise. The architecture
    sets the weight of the negative walk (:func:`auto_negative_weight`). The
    one home of the rule: :class:`~captum_prxai.PageRankAttribution` applies
    it, :func:`captum_prxai.methods.default_method` names it for a model
    (docs/default_search.md gives the measurements that chose it).
    """
    return "both" if has_negative_walk(edge_weight, graph, signed) else "positive"


#: The weight ``λ`` of the negative walk that ``negative_weight="auto"`` gives bidirectional attention (encoders):
#: the smallest worst case over the encoder tune cells in the fourth round of docs/default_search.md.
ENCODER_NEGATIVE_WEIGHT = 0.25


def auto_negative_weight(causal: bool) -> float:
    """The ``λ`` of ``negative_weight="auto"``: 1 for causal attention (decoders), 0.25 otherwise (encoders).

    Chosen by the worst case on the tune halves (docs/default_search.md,
    fourth round): on the encoder cells ``λ = 0.25`` has the smallest worst
    case (``λ = 1`` loses 0.12 comprehensiveness on BBC News); on the SmolLM2
    cells ``λ = 1`` leads ``λ = 0.25`` by 0.05-0.12.
    """
    return 1.0 if causal else ENCODER_NEGATIVE_WEIGHT


#: ``γ`` of the default edges ``(A^γ ⊙ dA)⁺``: PR-TAG's, chosen in the first round of docs/default_search.md.
DEFAULT_ATTENTION_POWER = 0.5
#: Encoders with at least this many attention layers temper the attention less (:func:`auto_attention_power`).
DEEP_ENCODER_LAYERS = 12
#: ``γ`` of ``attention_power="auto"`` on encoders of at least :data:`DEEP_ENCODER_LAYERS` layers.
DEEP_ENCODER_ATTENTION_POWER = 0.25


def auto_attention_power(causal: bool, depth: int) -> float:
    """The ``γ`` of ``attention_power="auto"``: 0.25 on encoders of 12 or more attention layers, 0.5 otherwise.

    A rule by depth, chosen by the worst case on the tune halves
    (docs/default_search.md, seventh round): with the default's two walks,
    ``γ = 0.25`` gains on the 12-layer MPNet halves (on 100 movie reviews
    +0.020 comprehensiveness and −0.024 sufficiency) and loses on MiniLM-L6's
    spam half (+0.03 sufficiency), so tempering less on the deeper encoder and
    as before on the 6-layer one has the smallest worst case. With a ninth
    tune half (MPNet BBC News, eighth round) ``γ = 0.25`` on every encoder
    ties it, and the next-worst loss keeps the rule. Only depths 6 and 12
    were measured; decoders (causal attention) keep 0.5, where ``γ = 0.25``
    has the larger worst case on their tune halves.

    Args:
        causal (bool): Whether the attention is causal (a decoder).
        depth (int): The number of attention layers walked.
    """
    return DEEP_ENCODER_ATTENTION_POWER if _deep_encoder(causal, depth) else DEFAULT_ATTENTION_POWER


def _deep_encoder(causal: bool, depth: int) -> bool:
    """Whether the rules by depth treat a model as a deep encoder: bidirectional, 12 or more attention layers."""
    return not causal and depth >= DEEP_ENCODER_LAYERS


#: The gate of ``walk_gate="auto"`` on encoders of at least :data:`DEEP_ENCODER_LAYERS` layers (ninth round of
#: docs/default_search.md): one walk where the two walks' scores correlate above it.
DEEP_ENCODER_WALK_GATE = 0.5


def auto_walk_gate(causal: bool, depth: int) -> Optional[float]:
    """The gate of ``walk_gate="auto"``: 0.5 on encoders of 12 or more attention layers, none otherwise.

    Chosen by the worst case on the tune halves (docs/default_search.md,
    ninth round): on the 12-layer MPNet halves the gate at 0.5 lowers the
    worst case of the two walks from +0.045 (BBC News comprehensiveness) to
    +0.024, level with one walk, and the next-worst loss prefers it to one
    walk and to the thresholds 0.3-0.4. The 6-layer encoder and the decoders
    keep two walks on every example, as measured in the fourth and seventh
    rounds. ``causal`` and ``depth`` as in :func:`auto_attention_power`.
    """
    return DEEP_ENCODER_WALK_GATE if _deep_encoder(causal, depth) else None


#: The power ``p`` of ``hub_power="auto"`` on encoders (eleventh round of docs/default_search.md): each walk's
#: PageRank times its graph's global PageRank to this power.
ENCODER_HUB_POWER = 0.5


def auto_hub_power(causal: bool, depth: int, graph: str = "token") -> float:
    """The ``p`` of ``hub_power="auto"``: 0.5 on encoders (bidirectional attention), 0 on decoders and on the
    layered graph (which has no global walk to weigh by).

    Chosen by the worst case on the tune halves (docs/default_search.md,
    eleventh round): over eleven encoder tune halves of both depths, weighing
    each walk by its graph's hubs (``x ⊙ g^0.5``) lowers the worst case of the
    default from +0.029 to +0.018 comprehensiveness (MPNet BBC News), and
    the held-out halves and the matrix keep it. On the four decoder tune
    halves (sixteenth round) it trails the decoders' default, so decoders
    keep 0. ``causal`` and ``depth`` as in
    :func:`auto_attention_power` (the rule does not depend on depth).
    """
    return 0.0 if causal or graph != "token" else ENCODER_HUB_POWER


#: What ``objective="auto"`` explains on every model (docs/default_search.md: the thirteenth round on encoders, the
#: fourteenth on decoders): the class's log-probability (:data:`captum_prxai.capture.OBJECTIVES`).
AUTO_OBJECTIVE = "log_probability"


def auto_objective(causal: bool, depth: int) -> str:
    """The ``objective`` of ``objective="auto"``: the class's log-probability, on encoders and decoders alike.

    Chosen by the worst case on the tune halves (docs/default_search.md):
    over the eleven encoder tune halves of both depths (thirteenth round),
    explaining ``log softmax(z)_t`` instead of the logit ``z_t`` lowers the
    encoder default's worst case from +0.018 to +0.014 (level on the
    two-class halves, ahead on the five-class BBC News ones); over the four
    decoder tune halves (fourteenth round) it lowers the decoder default's
    from +0.042 to +0.004 (ahead on sentences, level or ahead elsewhere);
    both held on the held-out halves.
    Its gradient is the logit's minus the probability-weighted mean of every
    class's, the part of ``∇z_t`` that can change the prediction (with two
    classes, the contrastive ``∇(z_t − z_other)`` up to a positive factor).
    ``causal`` and ``depth`` as in :func:`auto_attention_power`; the rule
    depends on neither (every ``auto_*`` rule takes the same arguments).
    """
    return AUTO_OBJECTIVE


#: What ``propagation="auto"`` gives on encoders (docs/default_search.md, seventeenth round): the backward pass with
#: the attention softmax and the normalisers' scale held constant (:mod:`captum_prxai.conservative`)
ENCODER_PROPAGATION = "conservative"
#: ... and the ``relevance_weight`` of ``relevance_weight="auto"`` on encoders
ENCODER_RELEVANCE_WEIGHT = 1.0


def auto_propagation(causal: bool, depth: int) -> str:
    """The ``propagation`` of ``propagation="auto"``: ``"conservative"`` on encoders (bidirectional attention),
    ``"gradient"`` on decoders.

    Chosen by the worst case on the tune halves (docs/default_search.md,
    seventeenth round): over the ten encoder tune halves, the default's
    edges taken from CP-LRP's backward pass (Ali et al., ICML 2022: each
    attention softmax and LayerNorm scale held constant) lower the worst case
    from +0.098 to +0.028 (+0.012 with :func:`auto_relevance_weight`),
    gaining on the five-class topic halves (MPNet BBC News +0.098
    comprehensiveness) as on the two-class ones, where every earlier
    construction that gained on sentiment lost on topic. Decoders keep the
    model's own gradient: on the four SmolLM2 tune halves (a first look, no
    rule decision) holding the softmax alone is level on comprehensiveness,
    and their RMSNorm is written out by hand, which the hold does not see
    (held by the benchmark's hooks, it gains on BBC News only).
    ``causal`` and ``depth`` as in :func:`auto_attention_power`.
    """
    return "gradient" if causal else ENCODER_PROPAGATION


def auto_relevance_weight(causal: bool, depth: int,
                          edge_weight: Union[str, EdgeWeight] = DEFAULT_EDGE_WEIGHT) -> float:
    """The ``w`` of ``relevance_weight="auto"``: 1 on encoders, 0 on decoders and on attention-only edges (PR-A,
    which needs no backward pass; see :func:`relevance_weighted`).

    Chosen with :func:`auto_propagation` (docs/default_search.md, seventeenth
    round): over the ten encoder tune halves, the conservative pass's walk
    times ``1 + R / max|R|`` (``R`` that pass's gradient x input) has the
    worst case +0.012, level (one standard error 0.015), against +0.028 for
    the walk alone. On the four SmolLM2 tune halves (a first look) it adds
    nothing to the softmax-held pass, so decoders keep 0.
    ``causal`` and ``depth`` as in :func:`auto_attention_power`.
    """
    return 0.0 if causal or (isinstance(edge_weight, str) and edge_weight == "attention") else ENCODER_RELEVANCE_WEIGHT


def walk_correlation(positive: Tensor, negative: Tensor, ordinary: Tensor) -> Tensor:
    """``(B,)`` Pearson correlation of two walks' scores ``(B, T)`` over each example's ``ordinary`` tokens.

    ``ordinary`` ``(B, T)`` marks the tokens compared: :func:`score_graph`
    passes the real tokens other than the explained one (whose teleport mass
    both walks share). An example where either walk is constant on them gets 0.
    High when the negative walk ranks the same tokens as the positive one (it
    then mostly retraces the graph's traffic), low or negative when it singles
    out other tokens (the counter-evidence that the second walk is for).
    Computed in float64.
    """
    weight = ordinary.to(torch.float64)
    count = weight.sum(-1, keepdim=True).clamp_min(1.0)
    centred = []
    for walk in (positive, negative):
        walk = walk.to(torch.float64) * weight
        centred.append((walk - walk.sum(-1, keepdim=True) / count) * weight)
    p, n = centred
    scale = p.norm(dim=-1) * n.norm(dim=-1)
    return torch.where(scale > 0, (p * n).sum(-1) / scale.clamp_min(1e-300), torch.zeros_like(scale))


def layer_edge_map(edge_weight: Union[str, EdgeWeight], head_reduction: str = "mean",
                   attention_power: Optional[float] = None) -> Callable[[Tensor, Optional[Tensor]], Tensor]:
    """``(A, dA) -> (B, T, T)``: the edge weight applied per head, then the heads reduced.

    A callable edge weight must return a tensor of shape ``(B, H, T, T)``
    (reduced here with ``head_reduction``) or ``(B, T, T)``; anything else
    raises a :class:`PRXAIError` naming the shape it returned.
    """
    edge = edge_weight_fn(edge_weight, attention_power)
    if head_reduction not in HEAD_REDUCTIONS:
        raise PRXAIError(f"Unknown head_reduction {head_reduction!r}; choose one of {sorted(HEAD_REDUCTIONS)}.")

    def edge_map(attention: Tensor, grad: Optional[Tensor]) -> Tensor:
        return _edge_map(edge, head_reduction, attention, grad)

    return edge_map


def _edge_map(edge: EdgeWeight, head_reduction: str, attention: Tensor, grad: Optional[Tensor]) -> Tensor:
    weights = edge(attention, grad)
    if not isinstance(weights, Tensor):
        raise PRXAIError(
            f"The edge_weight callable returned {type(weights).__name__}, not a tensor; it must return "
            f"non-negative weights of shape {tuple(attention.shape)} (B, H, T, T)."
        )
    if weights.shape == attention.shape:
        return reduce_heads(weights, head_reduction)
    reduced = attention.shape[:1] + attention.shape[2:]
    if weights.shape == reduced:
        return weights
    raise PRXAIError(
        f"The edge_weight callable returned shape {tuple(weights.shape)}; expected (B, H, T, T) = "
        f"{tuple(attention.shape)} or (B, T, T) = {tuple(reduced)}."
    )


@dataclass(frozen=True, eq=False)
class GraphSpec:
    r"""Everything that decides a PR-XAI graph and its PageRank, as one value.

    Args:
        edge_weight (str or callable): ``"attention"`` (``A``), ``"gradient"``
            (``dA⁺``), ``"attention_gradient"`` (``(A ⊙ dA)⁺``),
            ``"gradient_abs"``, ``"attention_gradient_abs"``, or a callable
            ``(A, dA) -> W`` on per-head ``(B, H, T, T)`` tensors returning
            non-negative ``(B, H, T, T)`` (or already head-reduced
            ``(B, T, T)``) weights; also ``"tempered_attention_gradient"``,
            ``(A^γ ⊙ dA)⁺`` with ``γ = attention_power``. Default:
            :data:`DEFAULT_EDGE_WEIGHT`.
        head_reduction (str): ``"mean"``, ``"sum"`` or ``"max"``. Default: ``"mean"``.
        graph (str): ``"token"`` or ``"layered"``. Default: ``"token"``.
        residual (float, optional): Residual self-edge weight in ``[0, 1)``;
            ``None`` means 0 for the token graph and 0.5 for the layered graph.
        normalize_layers (bool): Token graph: scale each layer to unit mass
            before summing. Default: False.
        sink (str): ``"auto"`` (drop edges into the first token for causal
            attention only), ``"keep"`` or ``"drop"``.
        self_loops (str): Token graph: ``"auto"`` (drop for causal attention
            only), ``"keep"`` or ``"drop"``.
        teleport (str or Tensor): ``"target"``, ``"uniform"``,
            ``"input_gradient"`` or a ``(B, T)`` / ``(T,)`` weight tensor.
        damping (float): PageRank damping in ``[0, 1)``. Default: 0.7.
        tol (float): PageRank tolerance, positive. Default: 1e-6.
        max_iter (int): PageRank iteration limit, at least 1. Default: 100.
        signed (bool): Give each score the sign of the token's gradient x input.
        attention_power (float): ``γ`` in ``[0, 2]`` of
            ``"tempered_attention_gradient"``. Default: 0.5.
        walks (str): ``"positive"`` (one walk on the edges ``W(A, dA)``) or
            ``"both"``: a second walk on the negative edges ``W(A, −dA)``
            (for PR-TAG, ``(A^γ ⊙ (−dA))⁺``: where more attention would lower
            the target), and the scores are the positive walk's PageRank minus
            the negative walk's. Signed scores (tokens that argue against the
            target rank last), summing to 0, from the same pass: the capture
            keeps both maps. Token graph and gradient edges only (see
            :func:`has_negative_walk`). Default: ``"positive"``
            (:class:`~captum_prxai.PageRankAttribution` resolves its own
            ``"auto"`` to ``"both"``: :func:`auto_walks`).
        negative_weight (float): ``walks="both"``: the weight ``λ ≥ 0`` of the
            negative walk, scores ``P⁺ − λ P⁻`` (both PageRank vectors sum to
            one, so the scores sum to ``1 − λ``). ``λ = 0`` ranks as the positive
            walk alone; the fourth round of docs/default_search.md measures
            0.25, 0.5 and 0.75. Ignored with one walk. Default: 1.0
            (:class:`~captum_prxai.PageRankAttribution` resolves its own
            ``"auto"`` by architecture: :func:`auto_negative_weight`).
        walk_gate (float, optional): ``walks="both"``: per example, keep the
            positive walk alone (``λ = 0``) where the Pearson correlation of
            the two walks' scores over the real tokens other than the
            explained one is above this value in ``[-1, 1]``
            (:func:`walk_correlation`); elsewhere ``P⁺ − λ P⁻``. Where the
            walks agree, subtracting the negative one mostly takes away the
            graph's traffic rather than counter-evidence. The same pass and
            graph; :func:`walk_weights` gives each example's ``λ``. ``None``:
            no gate. Ignored with one walk. Default: ``None``
            (:class:`~captum_prxai.PageRankAttribution` resolves its own
            ``"auto"`` by architecture and depth: :func:`auto_walk_gate`).
        hub_power (float): Token graph: weigh each walk's PageRank ``x`` by
            the same graph's global PageRank ``g`` (uniform teleport, the same
            damping) raised to this power ``p`` in ``[0, 2]``, ``x ⊙ g^p``
            renormalised to sum to one (:func:`hub_weighted`), so tokens the
            whole graph routes its traffic to (its hubs) rank higher: the
            reverse of the relative PageRank of Andersen, Chung and Lang,
            which divides by ``g``. The eleventh round of
            docs/default_search.md measures ``p`` = 0.5 and 1 (and dividing,
            which loses). One more PageRank per walk, on the same graph; the
            gate (``walk_gate``) still decides on the walks' own PageRank.
            Default: 0 (the personalised PageRank alone;
            :class:`~captum_prxai.PageRankAttribution` resolves its own
            ``"auto"`` by architecture: :func:`auto_hub_power`).
        relevance_weight (float): Each token's score times
            ``1 + w · R / max|R|``, ``R`` the token's gradient x input at the
            first attention layer from the same backward pass (summed over
            the hidden size; with ``propagation="conservative"`` CP-LRP's
            relevance, Ali et al. 2022), ``w`` this weight in ``[0, 1]``: a
            token the pass credits is raised up to ``1 + w`` times its walk
            score, one it debits lowered towards ``1 − w`` times it; the walk's
            order stays among tokens of small ``R`` (:func:`relevance_weighted`).
            The seventeenth round of docs/default_search.md measures ``w = 1``.
            Default: 0 (the walk's scores alone;
            :class:`~captum_prxai.PageRankAttribution` resolves its own
            ``"auto"`` by architecture: :func:`auto_relevance_weight`).

    All values are checked here, so a bad option fails when the attribution
    is constructed, before any pass through the model.

    References:
        B. Azarkhalili, L. Li, M. W. Libbrecht. *PR-XAI: PageRank-Based
        Feature Attribution for Transformers.* ACL 2026.
    """

    edge_weight: Union[str, EdgeWeight] = DEFAULT_EDGE_WEIGHT
    head_reduction: str = "mean"
    graph: str = "token"
    residual: Optional[float] = None
    normalize_layers: bool = False
    sink: str = "auto"
    self_loops: str = "auto"
    teleport: Union[str, Tensor] = "target"
    damping: float = DEFAULT_DAMPING
    tol: float = 1e-6
    max_iter: int = 100
    signed: bool = False
    attention_power: float = DEFAULT_ATTENTION_POWER
    walks: str = "positive"
    negative_weight: float = 1.0
    walk_gate: Optional[float] = None
    hub_power: float = 0.0
    relevance_weight: float = 0.0
    _edge: EdgeWeight = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_edge", edge_weight_fn(self.edge_weight, self.attention_power))
        if self.head_reduction not in HEAD_REDUCTIONS:
            raise PRXAIError(
                f"Unknown head_reduction {self.head_reduction!r}; choose one of {sorted(HEAD_REDUCTIONS)}."
            )
        if self.graph not in GRAPHS:
            raise PRXAIError(f"Unknown graph {self.graph!r}; choose one of {list(GRAPHS)}.")
        residual = self.residual
        if residual is None:
            residual = 0.5 if self.graph == "layered" else 0.0
        if isinstance(residual, bool) or not isinstance(residual, (int, float)) or not 0.0 <= float(residual) < 1.0:
            raise PRXAIError(f"residual must be a number in [0, 1), got {residual!r}.")
        object.__setattr__(self, "residual", float(residual))
        damping = self.damping
        if isinstance(damping, bool) or not isinstance(damping, (int, float)) or not 0.0 <= float(damping) < 1.0:
            raise PRXAIError(f"damping must be a number in [0, 1), got {damping!r}.")
        object.__setattr__(self, "damping", float(damping))
        for name in ("sink", "self_loops"):
            if getattr(self, name) not in _POLICIES:
                raise PRXAIError(f"{name} must be 'auto', 'keep' or 'drop', got {getattr(self, name)!r}.")
        if isinstance(self.teleport, str):
            if self.teleport not in TELEPORTS:
                raise PRXAIError(
                    f"Unknown teleport {self.teleport!r}; choose one of {list(TELEPORTS)} or pass a (B, T) tensor."
                )
        elif isinstance(self.teleport, Tensor):
            if self.teleport.dim() not in (1, 2) or not torch.isfinite(self.teleport.float()).all() or (
                self.teleport < 0
            ).any():
                raise PRXAIError("A teleport tensor must be (T,) or (B, T) and hold finite, non-negative weights.")
        else:
            raise PRXAIError(f"teleport must be a string or a tensor, got {type(self.teleport).__name__}.")
        tol = self.tol
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not (math.isfinite(tol) and tol > 0):
            raise PRXAIError(f"tol must be a positive number, got {tol!r}.")
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, int) or self.max_iter < 1:
            raise PRXAIError(f"max_iter must be an integer of at least 1, got {self.max_iter!r}.")
        if not isinstance(self.normalize_layers, bool) or not isinstance(self.signed, bool):
            raise PRXAIError("normalize_layers and signed must be True or False.")
        if self.walks not in WALKS:
            raise PRXAIError(f"walks must be one of {list(WALKS)}, got {self.walks!r}.")
        weight = self.negative_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not (
            math.isfinite(weight) and weight >= 0
        ):
            raise PRXAIError(f"negative_weight must be a finite number >= 0, got {weight!r}.")
        object.__setattr__(self, "negative_weight", float(weight))
        gate = self.walk_gate
        if gate is not None:
            if isinstance(gate, bool) or not isinstance(gate, (int, float)) or not -1.0 <= float(gate) <= 1.0:
                raise PRXAIError(f"walk_gate must be None or a number in [-1, 1], got {gate!r}.")
            object.__setattr__(self, "walk_gate", float(gate))
        power = self.hub_power
        if isinstance(power, bool) or not isinstance(power, (int, float)) or not 0.0 <= float(power) <= 2.0:
            raise PRXAIError(f"hub_power must be a number in [0, 2], got {power!r}.")
        object.__setattr__(self, "hub_power", float(power))
        weight = self.relevance_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= float(weight) <= 1.0:
            raise PRXAIError(f"relevance_weight must be a number in [0, 1], got {weight!r}.")
        object.__setattr__(self, "relevance_weight", float(weight))
        if self.hub_power and self.graph != "token":
            raise PRXAIError("hub_power weighs the token graph's walks by its global PageRank; the layered graph "
                             "has none. Use graph='token' or hub_power=0.")
        if self.walks == "both":  # asked for explicitly: refuse what has no negative walk
            reason = _no_negative_walk(self.edge_weight, self.graph, self.signed)
            if reason is not None:
                raise PRXAIError(reason)

    @property
    def both_walks(self) -> bool:
        """Whether the negative walk is walked too (``walks="both"``)."""
        return self.walks == "both"

    # -- what the capture needs -----------------------------------------------------------------
    @property
    def needs_gradients(self) -> bool:
        """Whether the edges (or the teleport / sign) need a backward pass."""
        return self.edge_weight != "attention" or self.needs_input_gradient

    @property
    def needs_input_gradient(self) -> bool:
        """Whether gradient x input at the first layer is needed (``signed``, ``teleport="input_gradient"`` or a
        ``relevance_weight``)."""
        return self.signed or self.relevance_weight > 0 or (
            isinstance(self.teleport, str) and self.teleport == "input_gradient")

    def replace(self, **changes: Any) -> "GraphSpec":
        """A copy with some fields changed (checked again)."""
        if "graph" in changes and "residual" not in changes:
            changes["residual"] = None
        return replace(self, **changes)

    def edge_map(self, attention: Tensor, grad: Optional[Tensor]) -> Tensor:
        """One layer's head-reduced ``(B, T, T)`` edge map from per-head ``A`` and ``dA`` ``(B, H, T, T)``.

        With ``walks="both"``, ``(2, B, T, T)``: the positive edges ``W(A, dA)``
        and the negative ones ``W(A, -dA)``. The capture hooks call this as
        each layer's maps arrive, so per-head tensors never outlive their
        layer; see :func:`layer_edge_map`.
        """
        positive = _edge_map(self._edge, self.head_reduction, attention, grad)
        if not self.both_walks:
            return positive
        assert grad is not None  # needs_gradients
        return torch.stack([positive, _edge_map(self._edge, self.head_reduction, attention, -grad)])


@dataclass
class BuiltGraph:
    """The graph PageRank runs on, built from one captured pass by :func:`build_graph`.

    For the token graph, ``adjacency`` is ``(B, T, T)`` with ``adjacency[b, i, j]``
    the edge ``i -> j``. For the layered graph, ``transitions`` holds the ``L``
    per-layer ``(B, T, T)`` maps (``transitions[l]`` links layer ``l + 1`` to
    layer ``l``); :meth:`layered_adjacency` assembles the full
    ``((L + 1) T)``-node graph for drawing or checking.
    """

    kind: str  #: ``"token"`` or ``"layered"``
    mask: Tensor  #: ``(B, T)`` real tokens
    teleport: Tensor  #: ``(B, T)`` teleport weights over tokens (layered: on the top layer)
    adjacency: Optional[Tensor] = None  #: token graph ``(B, T, T)`` (with ``walks="both"``: the positive walk's)
    negative: Optional[Tensor] = None  #: ``walks="both"``: the negative walk's token graph ``(B, T, T)``
    transitions: Optional[list[Tensor]] = None  #: layered graph, ``L`` maps ``(B, T, T)``
    input_gradient: Optional[Tensor] = None  #: ``(B, T)`` gradient x input, for the sign
    target_position: Optional[Tensor] = None  #: ``(B,)`` the explained token (left out of :func:`walk_correlation`)

    @property
    def num_layers(self) -> int:
        """``L`` for the layered graph, 0 for the token graph."""
        return len(self.transitions) if self.transitions is not None else 0

    @property
    def node_layer(self) -> Tensor:
        """``(N,)`` layer of each node (all 0 for the token graph; 0 = input tokens)."""
        tokens = self.mask.shape[1]
        return torch.arange(self.num_layers + 1, device=self.mask.device).repeat_interleave(tokens)

    @property
    def node_position(self) -> Tensor:
        """``(N,)`` token position of each node."""
        return torch.arange(self.mask.shape[1], device=self.mask.device).repeat(self.num_layers + 1)

    def layered_adjacency(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The layered graph as one ``(B, N, N)`` adjacency with ``N = (L + 1) T`` nodes.

        Returns ``(adjacency, teleport (B, N), node_layer (N,), node_position (N,))``;
        node ``l * T + i`` is token ``i`` at layer ``l`` (layer 0: the input tokens).
        """
        if self.transitions is None:
            raise PRXAIError("layered_adjacency() is for the layered graph; this is a token graph.")
        batch, tokens = self.mask.shape
        layers = len(self.transitions)
        nodes = (layers + 1) * tokens
        ref = self.transitions[0]
        adjacency = torch.zeros(batch, nodes, nodes, dtype=ref.dtype, device=ref.device)
        for level, weights in enumerate(self.transitions):
            rows = slice((level + 1) * tokens, (level + 2) * tokens)
            cols = slice(level * tokens, (level + 1) * tokens)
            adjacency[:, rows, cols] = weights
        teleport = torch.zeros(batch, nodes, dtype=self.teleport.dtype, device=self.teleport.device)
        teleport[:, layers * tokens :] = self.teleport
        return adjacency, teleport, self.node_layer, self.node_position


def _apply_policies(spec: GraphSpec, maps: list[Tensor], mask: Tensor, causal: bool) -> list[Tensor]:
    if spec.sink == "drop" or (spec.sink == "auto" and causal):
        maps = drop_sink_edges(maps, mask)
    if spec.graph == "token" and (spec.self_loops == "drop" or (spec.self_loops == "auto" and causal)):
        maps = drop_self_loops(maps)
    return maps


def token_layer(spec: GraphSpec, edge_map: Tensor, mask: Tensor, causal: bool) -> Tensor:
    """One layer's term of the token graph: its ``(B, T, T)`` edge map with the sink and self-loop
    policies, the residual and the layer normalisation applied. The token graph is the sum of the terms.

    :func:`token_adjacency` sums them; :func:`~captum_prxai.capture.capture_graph` with
    ``layer_term`` sums them as the layers arrive, so no more than one layer's map is kept.
    """
    return token_graph(_apply_policies(spec, [edge_map], mask, causal), spec.residual, spec.normalize_layers)


def token_adjacency(spec: GraphSpec, captured: "CapturedGraph") -> Tensor:
    """The ``(B, T, T)`` token graph of a captured pass: the sum of its layers' :func:`token_layer` terms.

    A capture that summed the terms already (``captured.summed``) holds the sum as its one map.
    With ``walks="both"`` the maps, and so the result, are ``(2, B, T, T)``: positive, negative.
    :func:`build_graph` uses it; ``attribute_long`` builds one per window
    and stitches them before a single PageRank.
    """
    if spec.graph != "token":
        raise PRXAIError("token_adjacency is for graph='token'.")
    if captured.summed:
        total = captured.maps[0]
    else:
        total = token_layer(spec, captured.maps[0], captured.mask, captured.causal)
        for m in captured.maps[1:]:
            total = total + token_layer(spec, m, captured.mask, captured.causal)
    if bool(captured.mask.all()):  # no padding to zero: no (B, T, T) copies (the result may be a captured map)
        return total
    valid = captured.mask.to(total.dtype)
    return total * valid[:, :, None] * valid[:, None, :]


def teleport_for(spec: GraphSpec, mask: Tensor, target_position: Tensor, dtype: torch.dtype,
                 input_gradient: Optional[Tensor] = None) -> Tensor:
    """The ``(B, T)`` teleport vector of ``spec`` (see :func:`~captum_prxai.graph.builders.teleport_vector`)."""
    return teleport_vector(spec.teleport, mask, target_position, dtype, input_gradient)


def build_graph(spec: GraphSpec, captured: "CapturedGraph") -> BuiltGraph:
    """Turn a captured pass into the graph PageRank runs on, and its teleport vector.

    Args:
        spec (GraphSpec): The graph options.
        captured (CapturedGraph): Per-layer head-reduced ``(B, T, T)`` edge
            maps (from :meth:`GraphSpec.edge_map`), padding already zeroed,
            with the mask, the explained positions and the causal flag.

    Returns:
        BuiltGraph: the token adjacency or the layered transitions, and the teleport.
    """
    dtype = captured.maps[0].dtype
    teleport = teleport_for(spec, captured.mask, captured.target_position, dtype, captured.input_gradient)
    if spec.graph == "token":
        adjacency = token_adjacency(spec, captured)
        negative = None
        if spec.both_walks:
            adjacency, negative = adjacency[0], adjacency[1]
        return BuiltGraph("token", captured.mask, teleport, adjacency=adjacency, negative=negative,
                          input_gradient=captured.input_gradient, target_position=captured.target_position)
    if captured.summed:
        raise PRXAIError("the layered graph needs every layer's map; this capture kept only their sum.")
    maps = _apply_policies(spec, captured.maps, captured.mask, captured.causal)
    return BuiltGraph("layered", captured.mask, teleport, transitions=layered_transitions(maps, spec.residual,
                      captured.mask), input_gradient=captured.input_gradient,
                      target_position=captured.target_position)


def score_graph(spec: GraphSpec, built: BuiltGraph) -> Tensor:
    """PageRank token scores ``(B, T)`` of a built graph: non-negative, summing to one, zero on padding.

    With ``spec.signed`` each score takes the sign of the token's gradient x input. With a negative
    walk (``walks="both"``) the scores are the positive walk's PageRank minus ``λ`` times the negative
    walk's (both solved in one batched call): signed, summing to ``1 − λ`` (before any ``relevance_weight``,
    :func:`relevance_weighted`, which multiplies each token's score last), with ``λ`` per example from
    :func:`walk_weights` (``spec.negative_weight``, or 0 where ``spec.walk_gate`` keeps one walk).
    """
    if built.kind == "token":
        walks = token_walks(spec, built)
        if len(walks) == 2:
            return relevance_weighted(spec, combine_walks(spec, built, walks), built.input_gradient, built.mask)
        scores = walks[0][1]
    else:
        assert built.transitions is not None
        layers = len(built.transitions)
        teleport = built.teleport
        personalization = torch.zeros(teleport.shape[0], layers + 1, teleport.shape[1], dtype=teleport.dtype,
                                      device=teleport.device)
        personalization[:, layers] = teleport
        scores = layered_pagerank(built.transitions, spec.damping, personalization)[:, 0]
        scores = scores / scores.sum(-1, keepdim=True)
    return relevance_weighted(spec, apply_sign(spec, scores, built.input_gradient), built.input_gradient, built.mask)


def relevance_weighted(spec: GraphSpec, scores: Tensor, input_gradient: Optional[Tensor], mask: Tensor) -> Tensor:
    """``scores ⊙ (1 + w · R / max|R|)`` per example, ``w = spec.relevance_weight`` and ``R`` the gradient x input
    ``(B, T)`` at the first attention layer (zero on padding); ``scores`` unchanged when ``w`` is 0.

    With ``propagation="conservative"`` (:mod:`captum_prxai.conservative`) ``R`` is CP-LRP's relevance of each
    token (Ali et al., ICML 2022): the walk says how much of the explained token's attention flow reaches a token,
    ``R`` how much the token's own embedding contributes, and the product ranks first the tokens both credit.
    """
    if not spec.relevance_weight:
        return scores
    if input_gradient is None:
        raise PRXAIError("relevance_weight needs the gradient x input of the same pass; the capture returned none.")
    relevance = input_gradient.to(scores.dtype) * mask.to(scores.dtype)
    largest = relevance.abs().amax(-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)
    return scores * (1 + spec.relevance_weight * relevance / largest)


def token_walks(spec: GraphSpec, built: BuiltGraph,
                hub_power: Optional[float] = None) -> list[tuple[Tensor, Tensor]]:
    """Each walk of a token graph (the positive one, then the negative one with ``walks="both"``) as
    ``(ranks, scores)``, both ``(B, T)`` summing to one: its personalised PageRank and the walk's scores, the same
    unless ``spec.hub_power`` weighs them by the graph's hubs (:func:`hub_weighted`). The walks are solved in one
    batched call, and with ``hub_power`` their graphs' global PageRank in a second call on the same tensor (no copy
    of the graphs, which at long inputs are the largest tensors). ``hub_power``, when given, replaces
    ``spec.hub_power`` and may be negative (:func:`hub_weighted` divides by the hubs then; the benchmark's
    ratio candidates)."""
    assert built.adjacency is not None
    hub_power = spec.hub_power if hub_power is None else hub_power
    walks = 1 if built.negative is None else 2
    graphs = built.adjacency if walks == 1 else torch.cat([built.adjacency, built.negative])
    mask = built.mask.repeat(walks, 1)
    solve = partial(pagerank, graphs, spec.damping, node_mask=mask, tol=spec.tol, max_iter=spec.max_iter)
    ranks = solve(personalization=built.teleport.repeat(walks, 1)).chunk(walks)
    if not hub_power:
        return [(r, r) for r in ranks]
    everywhere = solve().chunk(walks)  # uniform teleport over the real tokens
    return [(r, hub_weighted(r, g, hub_power, built.mask)) for r, g in zip(ranks, everywhere)]


def combine_walks(spec: GraphSpec, built: BuiltGraph, walks: list[tuple[Tensor, Tensor]]) -> Tensor:
    """``(B, T)`` the two walks' scores combined, ``S⁺ − λ S⁻``: ``walks`` as :func:`token_walks` returns them
    (positive, then negative), ``λ`` per example from :func:`walk_weights` on the walks' PageRank vectors (the gate
    decides on them, not on the hub-weighted scores)."""
    (positive, positive_scores), (negative, negative_scores) = walks
    weights = walk_weights(spec, built, positive, negative).to(positive_scores.dtype)[:, None]
    return positive_scores - weights * negative_scores


def hub_weighted(ranks: Tensor, global_ranks: Tensor, power: float, mask: Tensor) -> Tensor:
    r"""``(B, T)`` a walk's PageRank ``ranks`` weighted by its graph's global PageRank: ``x ⊙ g^p``, zero outside
    ``mask``, renormalised to sum to one over each row (``power = 0`` gives ``ranks`` back, renormalised).

    A negative ``power`` divides by the hubs instead: ``power = −1`` is the relative PageRank ``x / g`` of
    Andersen, Chung and Lang (2006), which ranks a node by how much more the personalised walk visits it than
    a walk from anywhere (the benchmark's ratio candidates; :class:`GraphSpec` allows ``0 ≤ p ≤ 2`` only).

    References:
        R. Andersen, F. Chung, K. Lang. *Local graph partitioning using PageRank vectors.* FOCS 2006.
    """
    weighted = ranks * global_ranks.clamp_min(1e-30).pow(power) * mask.to(ranks.dtype)
    return weighted / weighted.sum(-1, keepdim=True)


def apply_sign(spec: GraphSpec, scores: Tensor, input_gradient: Optional[Tensor]) -> Tensor:
    """``signed=True``: give each score the sign of its gradient x input; otherwise unchanged."""
    if not spec.signed:
        return scores
    if input_gradient is None:
        raise PRXAIError("signed=True needs gradients; the attention maps were captured without a backward pass.")
    return torch.where(input_gradient < 0, -scores, scores)


def walk_weights(spec: GraphSpec, built: BuiltGraph, positive: Tensor, negative: Tensor) -> Tensor:
    """``(B,)`` the weight ``λ`` of each example's negative walk: ``spec.negative_weight``, or 0 where the gate
    keeps the positive walk alone (``spec.walk_gate``; :func:`walk_correlation` of the walks' PageRank vectors
    ``positive`` and ``negative`` ``(B, T)`` over the real tokens other than the explained one, above the gate)."""
    weights = torch.full((positive.shape[0],), spec.negative_weight, dtype=torch.float64, device=positive.device)
    if spec.walk_gate is None:
        return weights
    ordinary = built.mask.bool().clone()
    if built.target_position is not None:
        ordinary[torch.arange(ordinary.shape[0], device=ordinary.device), built.target_position] = False
    agree = walk_correlation(positive, negative, ordinary) > spec.walk_gate
    return torch.where(agree, torch.zeros_like(weights), weights)
