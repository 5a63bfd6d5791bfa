"""PR-XAI: PageRank over the attention graph (Azarkhalili, Li & Libbrecht, ACL 2026).

The flow of :class:`PageRankAttribution` is the one of the package, once:
:func:`~captum_prxai.capture.capture_graph` (one pass) ->
:func:`~captum_prxai.graph.spec.build_graph` (the graph of its
:class:`~captum_prxai.graph.spec.GraphSpec`) ->
:func:`~captum_prxai.graph.spec.score_graph` (PageRank) -> token scores.
:meth:`PageRankAttribution.attribute_graph` returns the graph with the scores,
for pictures and checks; :meth:`PageRankAttribution.attribute_long` runs the
same steps over sliding windows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

import torch
from captum._utils.common import _format_additional_forward_args
from captum.log import log_usage
from torch import Tensor, nn

from captum_prxai.attr._base import (
    AttentionGraphAttribution,
    TargetType,
    _check_inputs,
    _find_attention_mask,
    _format_target,
)
from captum_prxai.capture import (
    OBJECTIVES,
    CapturedGraph,
    LayerTerm,
    check_memory,
    check_objective,
    layers_are_causal,
    target_positions,
)
from captum_prxai.conservative import PROPAGATIONS, check_propagation
from captum_prxai.exceptions import PRXAIError
from captum_prxai.graph.edges import EdgeWeight
from captum_prxai.graph.pagerank import pagerank
from captum_prxai.graph.spec import (
    DEFAULT_DAMPING,
    DEFAULT_ATTENTION_POWER,
    DEFAULT_EDGE_WEIGHT,
    BuiltGraph,
    GraphSpec,
    apply_sign,
    auto_attention_power,
    auto_hub_power,
    auto_negative_weight,
    auto_objective,
    auto_propagation,
    auto_relevance_weight,
    auto_walk_gate,
    auto_walks,
    build_graph,
    hub_weighted,
    relevance_weighted,
    score_graph,
    teleport_for,
    token_adjacency,
    token_layer,
    walk_weights,
)
from captum_prxai.graph.windows import plan_windows, stitch_window_graphs
from captum_prxai.hooks import AttentionExtractor

__all__ = [
    "DEFAULT_DAMPING",
    "GraphExplanation",
    "PageRankAttribution",
    "PRAttention",
    "PRGradient",
    "PRAttentionGradient",
    "PRTemperedAttentionGradient",
]


@dataclass
class GraphExplanation:
    """Scores together with exactly the graph PageRank ran on, from :meth:`PageRankAttribution.attribute_graph`.

    ``pagerank(adjacency, damping, personalization=teleport, node_mask=...)``
    reproduces ``scores`` (for the layered graph: its layer-0 nodes,
    renormalised; with ``signed``, up to the sign; with ``walks="both"``, minus
    :attr:`walk_weights` times the PageRank of :attr:`negative_adjacency`; with
    ``hub_power``, each walk's PageRank times its graph's global PageRank to that
    power, :meth:`walk_scores`; with ``relevance_weight``, each token's score
    times :attr:`relevance_factor`), so a drawing of ``adjacency`` always shows
    the graph the scores came from.
    """

    scores: Tensor  #: ``(B, T)`` token scores, as :meth:`~PageRankAttribution.attribute` returns them
    built: BuiltGraph  #: the built graph (token adjacency or layered transitions) and its teleport
    spec: GraphSpec  #: the options it was built with
    mask: Tensor  #: ``(B, T)`` bool, real tokens
    target: Optional[Tensor]  #: ``(B,)`` the explained output index
    logits: Optional[Tensor]  #: ``(B, C)`` the model's prediction
    causal: bool  #: whether the model's attention was causal

    @property
    def damping(self) -> float:
        return self.spec.damping

    @property
    def adjacency(self) -> Tensor:
        """``(B, N, N)``: the token graph (``N = T``) or the whole layered graph (``N = (L + 1) T``)."""
        if self.built.kind == "token":
            assert self.built.adjacency is not None
            return self.built.adjacency
        return self.built.layered_adjacency()[0]

    @property
    def negative_adjacency(self) -> Optional[Tensor]:
        """``(B, T, T)``: the negative walk's token graph (``walks="both"``), else ``None``."""
        return self.built.negative

    @property
    def teleport(self) -> Tensor:
        """``(B, N)`` teleport weights over the nodes of :attr:`adjacency` (unnormalised)."""
        if self.built.kind == "token":
            return self.built.teleport
        return self.built.layered_adjacency()[1]

    @property
    def node_layer(self) -> Tensor:
        """``(N,)`` layer of each node (all 0 for the token graph; 0 = input tokens)."""
        return self.built.node_layer

    @property
    def node_position(self) -> Tensor:
        """``(N,)`` token position of each node."""
        return self.built.node_position

    @property
    def node_mask(self) -> Tensor:
        """``(B, N)`` nodes that are real tokens."""
        return self.mask.repeat(1, self.built.num_layers + 1)

    def node_ranks(self, walk: str = "positive") -> Tensor:
        """``(B, N)`` PageRank of every node of :attr:`adjacency` (for the token graph: the unsigned scores,
        before any ``hub_power`` weighting; :meth:`walk_scores` applies it).

        Solved again from the drawn graph with plain power iteration in fp64;
        for the layered graph this ranks every (token, layer) node, e.g. to
        size nodes in a picture. ``walk="negative"`` ranks the nodes of
        :attr:`negative_adjacency` instead (``walks="both"``).
        """
        return self._solve(walk, self.teleport.double())

    def global_ranks(self, walk: str = "positive") -> Tensor:
        """``(B, N)`` the global PageRank of the walk's graph: :meth:`node_ranks` with a uniform teleport over the
        real nodes, the ``g`` that ``hub_power`` weighs by (:func:`~captum_prxai.graph.spec.hub_weighted`)."""
        return self._solve(walk, self.node_mask.double())

    def walk_scores(self, walk: str = "positive") -> Tensor:
        """``(B, N)`` the walk's node scores as scoring weighed them: :meth:`node_ranks`, times
        :meth:`global_ranks` to the power ``hub_power`` and renormalised where it is set. A picture sizes
        each node by these, so it shows what the scores came from."""
        ranks = self.node_ranks(walk)
        if not self.spec.hub_power:
            return ranks
        return hub_weighted(ranks, self.global_ranks(walk), self.spec.hub_power, self.node_mask)

    def _solve(self, walk: str, teleport: Tensor) -> Tensor:
        spec = self.spec
        adjacency = self.negative_adjacency if walk == "negative" else self.adjacency
        if adjacency is None:
            raise PRXAIError("this graph has no negative walk; it was scored with walks='positive'.")
        return pagerank(adjacency.double(), spec.damping, personalization=teleport, node_mask=self.node_mask,
                        tol=spec.tol * 1e-3, max_iter=max(spec.max_iter, 1000))

    @property
    def walk_weights(self) -> Optional[Tensor]:
        """``(B,)`` the weight ``λ`` of each example's negative walk (``walks="both"``; 0 where ``walk_gate`` kept
        the positive walk alone, as :func:`~captum_prxai.graph.spec.walk_weights` decided when scoring), else
        ``None``. Read from :attr:`scores`, which sum to ``1 − λ``, so no PageRank is solved again (with a gate and
        a ``relevance_weight`` the scores are weighed per token, so the walks are solved again instead)."""
        if self.built.negative is None:
            return None
        weight = self.spec.negative_weight
        weights = torch.full((self.mask.shape[0],), weight, dtype=torch.float64, device=self.mask.device)
        if self.spec.walk_gate is None:  # no gate: every example's λ is the option's
            return weights
        if self.spec.relevance_weight:  # the scores are weighted per token: decide again as scoring did
            return walk_weights(self.spec, self.built, self.node_ranks(), self.node_ranks("negative")).double()
        # both walks' PageRank sum to one, so an example's scores sum to 1 − λ: read λ from the scores themselves
        one_walk = (1.0 - self.scores.double().sum(-1)).abs() < weight / 2
        return torch.where(one_walk, torch.zeros_like(weights), weights)

    @property
    def gate_kept_positive(self) -> Optional[Tensor]:
        """``(B,)`` bool: examples whose two walks agreed, so ``walk_gate`` kept the positive walk's PageRank alone
        (``λ`` = 0 in :attr:`walk_weights`); ``None`` unless the graph walks both signs with a gate."""
        if self.spec.walk_gate is None:
            return None
        weights = self.walk_weights
        return None if weights is None else weights == 0.0

    def rescore(self) -> Tensor:
        """PageRank of :attr:`adjacency` with :attr:`teleport`, reduced to token scores like :attr:`scores`.

        For checks: it agrees with :attr:`scores` to PageRank's tolerance.
        """
        tokens = self.mask.shape[1]
        ranks = self.walk_scores()[:, :tokens]
        ranks = ranks / ranks.sum(-1, keepdim=True)
        if self.built.negative is not None:  # the gate decides on the walks' own PageRank, as scoring did
            weights = walk_weights(self.spec, self.built, self.node_ranks(), self.node_ranks("negative"))
            scores = (ranks - weights[:, None] * self.walk_scores("negative")).to(self.scores.dtype)
        else:
            scores = apply_sign(self.spec, ranks.to(self.scores.dtype), self.built.input_gradient)
        return scores * self.relevance_factor.to(scores.dtype)

    @property
    def relevance_factor(self) -> Tensor:
        """``(B, T)`` what each token's walk score was multiplied by: ``1 + w · R / max|R|`` with ``R`` the same
        pass's gradient x input (``relevance_weight`` ``w``; :func:`~captum_prxai.graph.spec.relevance_weighted`),
        all ones without it."""
        ones = torch.ones(self.mask.shape, dtype=torch.float64, device=self.mask.device)
        if not self.spec.relevance_weight:
            return ones
        return relevance_weighted(self.spec, ones, self.built.input_gradient.double(), self.mask)


class PageRankAttribution(AttentionGraphAttribution):
    r"""PR-XAI: token importance as PageRank on the attention graph.

    One forward pass (plus one backward pass for gradient-based edges) is
    recorded with hooks on the attention layers. Each layer's attention
    ``A`` (and its gradient ``dA`` with respect to the target output) gives
    per-head edge weights from the attending token to the attended token,
    which are averaged over heads. The layers form a graph (see ``graph``),
    and personalised PageRank with teleport to the explained token (``[CLS]``
    for encoders, the last token for decoders) scores every input token.
    With one walk (``walks="positive"``) the scores of an example are
    non-negative and sum to one over its tokens. The default walks the
    negative edges too (``walks="auto"``, PR-TAG±): the scores are the
    positive walk's PageRank minus ``λ`` times the negative walk's, signed,
    so tokens that argue against the target rank last; ``λ`` is 0.25 for
    encoders and 1 for decoders (``negative_weight="auto"``), and encoders of
    12 or more layers temper the attention less, ``γ = 0.25``
    (``attention_power="auto"``) and keep the positive walk alone where the
    two walks' scores agree (``walk_gate="auto"``). On encoders each walk's
    PageRank is weighed by the square root of its graph's global PageRank,
    raising the tokens the whole graph routes its traffic to
    (``hub_power="auto"``). On encoders the backward pass holds every
    attention softmax and LayerNorm scale constant, as CP-LRP's does
    (``propagation="auto"``), and each token's score is weighed by that
    pass's gradient x input at the first attention layer,
    ``1 + R / max|R|`` (``relevance_weight="auto"``): still one forward and
    one backward pass. Padding gets exactly zero and is never part of
    the graph.

    The paper describes the method at the level of its abstract: attention
    as a directed graph, edge weights from attention weights and gradients,
    PageRank for token scores, with attention × gradient (PR-AG) the best
    variant. Every concrete choice below is ours and is an option; the
    defaults were picked by measured faithfulness (see the project README).

    Args:
        forward_func (Callable): Returns logits ``(B, C)``; called as
            ``forward_func(inputs, *additional_forward_args)``.
        layers (nn.Module or sequence of nn.Module): The attention modules,
            first layer first (:func:`captum_prxai.attention_layers`).
        edge_weight (str or callable): ``"attention"`` (``A``),
            ``"gradient"`` (``dA⁺``), ``"attention_gradient"`` (``(A ⊙ dA)⁺``),
            ``"tempered_attention_gradient"`` (``(A^γ ⊙ dA)⁺``, ``γ =
            attention_power``), or a callable ``(A, dA) -> W`` on
            ``(B, H, T, T)`` tensors returning non-negative weights; also
            ``"gradient_abs"`` and ``"attention_gradient_abs"`` (absolute
            values). Default: ``"tempered_attention_gradient"``
            (:data:`~captum_prxai.graph.spec.DEFAULT_EDGE_WEIGHT`, chosen by
            measurement; docs/default_search.md). The presets fix it.
        graph (str): ``"token"`` (one node per token, layer maps summed) or
            ``"layered"`` (one node per token and layer, residual stream as
            self-edges, solved exactly in one sweep). Default: ``"token"``.
        damping (float): PageRank damping factor. Default: 0.7 (chosen by the
            ablation over 0.5-0.95; networkx's customary 0.85 scored lower).
        teleport (str or Tensor): ``"target"`` (default), ``"uniform"``,
            ``"input_gradient"`` (positive gradient x input at the first
            layer, from the same backward pass) or a ``(B, T)`` weight
            tensor; the PageRank personalization vector.
        residual (float): Weight of the residual self-edge mixed into each
            row-normalised layer map, in ``[0, 1)``. Default: 0 for the token
            graph (raw maps summed), 0.5 for the layered graph.
        head_reduction (str): ``"mean"`` (default), ``"sum"`` or ``"max"``.
        target_position (str or int): Which token is explained; see
            :class:`~captum_prxai.attr._base.AttentionGraphAttribution`.
        attention_fn (callable, optional): Extracts attention probabilities
            from custom modules (see :class:`captum_prxai.hooks.AttentionRecorder`).
        tol (float): PageRank tolerance. Default: 1e-6.
        max_iter (int): PageRank iteration limit. Default: 100.
        capture (str): ``"auto"``, ``"recompute"`` or ``"weights"``; see
            :class:`~captum_prxai.attr._base.AttentionGraphAttribution`.
        normalize_layers (bool): Token graph only: scale each layer's map to
            unit total weight before summing, so all layers count the same.
            Default: False (raw maps summed).
        sink (str): ``"drop"`` removes the edges into the first token (the
            attention sink of decoders), ``"keep"`` leaves them, ``"auto"``
            (default) drops them when the attention is causal. See
            :func:`~captum_prxai.graph.builders.drop_sink_edges`.
        signed (bool): Give each token's PageRank score the sign of its
            gradient x input at the first layer (from the same backward pass),
            so tokens that push against the target rank last. PageRank says
            how much a token matters; the sign says in which direction.
            Default: False (non-negative scores summing to one).
        self_loops (str): Token graph only. ``"drop"`` removes each token's
            edge to itself, ``"keep"`` leaves it, ``"auto"`` (default) drops
            self-loops when the attention is causal, where they trap the walk
            (see :func:`~captum_prxai.graph.builders.drop_self_loops`).
        attention_power (float or str): ``γ`` of
            ``edge_weight="tempered_attention_gradient"``, ``(A^γ ⊙ dA)⁺``, in
            ``[0, 2]``. ``"auto"`` (default): the rule by depth chosen on the
            tune halves (docs/default_search.md, seventh round;
            :func:`~captum_prxai.graph.spec.auto_attention_power`): 0.25 on
            encoders with 12 or more attention layers (PR-TAG± (γ=0.25,
            λ=0.25)), 0.5 otherwise. :attr:`attention_power` holds the
            resolved value. :class:`PRTemperedAttentionGradient` fixes 0.5
            unless given it.
        pad_token_id (int, optional): Padding id, used as the mask when no
            attention mask reaches :meth:`attribute` (see
            :class:`~captum_prxai.attr._base.AttentionGraphAttribution`).
        walks (str): ``"positive"``, ``"both"`` (also walk the negative edges
            ``W(A, −dA)`` and return the positive walk's PageRank minus
            ``negative_weight`` times the negative walk's: signed scores, from
            the same pass; see :class:`~captum_prxai.graph.spec.GraphSpec`) or
            ``"auto"`` (default): ``"both"`` when the edges have a negative
            walk (the built-in gradient edges on the token graph,
            :func:`~captum_prxai.graph.spec.auto_walks`), ``"positive"``
            otherwise. :attr:`walks` holds the resolved choice. The presets
            :class:`PRGradient`, :class:`PRAttentionGradient` and
            :class:`PRTemperedAttentionGradient` walk the positive edges only
            unless given ``walks``.
        negative_weight (float or str): With two walks, the weight ``λ ≥ 0``
            of the negative walk: scores ``P⁺ − λ P⁻``, summing to ``1 − λ``.
            ``"auto"`` (default): the rule by architecture chosen on the tune
            halves (docs/default_search.md, fourth round;
            :func:`~captum_prxai.graph.spec.auto_negative_weight`): 1 when the
            layers declare causal attention (decoders,
            :func:`~captum_prxai.capture.layers_are_causal`: PR-TAG±), 0.25
            otherwise (encoders: PR-TAG± (λ=0.25), with ``hub_power="auto"``
            PR-TAG± (λ=0.25, hubs 0.5)). :attr:`negative_weight`
            holds the resolved value.
        walk_gate (float, str or None): With two walks, keep the positive
            walk alone (``λ = 0``) on an example where the two walks' scores
            correlate above this value over its real tokens other than the
            explained one (:class:`~captum_prxai.graph.spec.GraphSpec`); the
            same pass. ``None``: two walks on every example. ``"auto"``
            (default): the rule by depth chosen on the tune halves
            (docs/default_search.md, ninth round;
            :func:`~captum_prxai.graph.spec.auto_walk_gate`): 0.5 on encoders
            with 12 or more attention layers, ``None`` otherwise.
            :attr:`walk_gate` holds the resolved value.
        hub_power (float or str): Token graph: weigh each walk's PageRank by
            the same graph's global PageRank to this power in ``[0, 2]``
            (``x ⊙ g^p``, renormalised), raising the tokens the whole graph
            routes its traffic to; the gate still decides on the walks' own
            PageRank (:class:`~captum_prxai.graph.spec.GraphSpec`). One more
            PageRank per walk, on the same graph. ``"auto"`` (default): the
            rule by architecture chosen on the tune halves
            (docs/default_search.md, eleventh round;
            :func:`~captum_prxai.graph.spec.auto_hub_power`): 0.5 on encoders,
            0 on decoders and on the layered graph. :attr:`hub_power` holds
            the resolved value. The presets fix 0 unless given it.
        objective (str): What the backward pass differentiates, so what the
            gradient edges explain: ``"output"`` the target's entry of
            ``forward_func``'s output as returned (its logit), or
            ``"log_probability"`` the target class's log-probability,
            ``log softmax(z)_t`` over the ``C ≥ 2`` outputs (``log p_t`` when
            ``forward_func`` already returns probabilities;
            :func:`~captum_prxai.capture.log_probabilities`), whose gradient
            is the logit's minus the probability-weighted mean of every
            class's: the part that can change the prediction, and what the
            deletion metrics measure. With one output per example the output
            is explained as returned. ``"auto"`` (default): the
            log-probability on every model, chosen on the tune halves
            (docs/default_search.md, thirteenth round on encoders, fourteenth
            on decoders; :func:`~captum_prxai.graph.spec.auto_objective`).
            :attr:`objective` holds the resolved value. The presets fix
            ``"output"`` unless given it. The same pass either way.
        propagation (str): How the backward pass propagates: ``"gradient"``
            the model's own gradient, or ``"conservative"`` with every
            attention softmax and LayerNorm scale held constant in the
            backward pass, their forward values unchanged: CP-LRP's backward
            pass (Ali et al., ICML 2022; :mod:`captum_prxai.conservative`), so
            ``dA`` and the gradient x input are those of the network with its
            attention weights and normalisers fixed. ``"auto"`` (default):
            the rule by architecture chosen on the tune halves
            (docs/default_search.md, seventeenth round;
            :func:`~captum_prxai.graph.spec.auto_propagation`):
            ``"conservative"`` on encoders, ``"gradient"`` on decoders.
            :attr:`propagation` holds the resolved value. The presets fix
            ``"gradient"`` unless given it. The same single pass either way.
        relevance_weight (float or str): Each token's score times
            ``1 + w · R / max|R|``, ``R`` its gradient x input at the first
            attention layer from the same pass (CP-LRP's relevance under
            ``propagation="conservative"``), ``w`` in ``[0, 1]``
            (:func:`~captum_prxai.graph.spec.relevance_weighted`). ``"auto"``
            (default): 1 on encoders, 0 on decoders (seventeenth round;
            :func:`~captum_prxai.graph.spec.auto_relevance_weight`).
            :attr:`relevance_weight` holds the resolved value. The presets
            fix 0 unless given it.

    All graph options live in :attr:`spec`, a
    :class:`~captum_prxai.graph.spec.GraphSpec`, checked when the attribution
    is built.

    References:
        B. Azarkhalili, L. Li, M. W. Libbrecht. *PR-XAI: PageRank-Based
        Feature Attribution for Transformers.* ACL 2026.
        L. Page et al. *The PageRank citation ranking.* 1999.
    """

    def __init__(
        self,
        forward_func: Callable,
        layers: Union[nn.Module, Sequence[nn.Module]],
        edge_weight: Union[str, EdgeWeight] = DEFAULT_EDGE_WEIGHT,
        graph: str = "token",
        damping: float = DEFAULT_DAMPING,
        teleport: Union[str, Tensor] = "target",
        residual: Optional[float] = None,
        head_reduction: str = "mean",
        target_position: Union[str, int] = "auto",
        attention_fn: Optional[AttentionExtractor] = None,
        tol: float = 1e-6,
        max_iter: int = 100,
        capture: str = "auto",
        normalize_layers: bool = False,
        sink: str = "auto",
        signed: bool = False,
        self_loops: str = "auto",
        pad_token_id: Optional[int] = None,
        attention_power: Union[float, str] = "auto",
        walks: str = "auto",
        negative_weight: Union[float, str] = "auto",
        walk_gate: Union[float, str, None] = "auto",
        hub_power: Union[float, str] = "auto",
        objective: str = "auto",
        propagation: str = "auto",
        relevance_weight: Union[float, str] = "auto",
    ) -> None:
        super().__init__(forward_func, layers, attention_fn, head_reduction, target_position, capture, pad_token_id)
        self.objective = objective
        self.propagation = propagation
        if isinstance(walks, str) and walks == "auto":
            walks = auto_walks(edge_weight, graph, signed)
        if isinstance(negative_weight, str) and negative_weight == "auto":
            negative_weight = auto_negative_weight(layers_are_causal(self.layers))
        if isinstance(attention_power, str) and attention_power == "auto":
            attention_power = auto_attention_power(layers_are_causal(self.layers), len(self.layers))
        if isinstance(walk_gate, str) and walk_gate == "auto":
            walk_gate = auto_walk_gate(layers_are_causal(self.layers), len(self.layers))
        if isinstance(hub_power, str) and hub_power == "auto":
            hub_power = auto_hub_power(layers_are_causal(self.layers), len(self.layers), graph)
        if isinstance(relevance_weight, str) and relevance_weight == "auto":
            relevance_weight = auto_relevance_weight(layers_are_causal(self.layers), len(self.layers), edge_weight)
        #: every graph option, checked once; the attributes below mirror it
        self.spec = GraphSpec(
            edge_weight=edge_weight, head_reduction=head_reduction, graph=graph, residual=residual,
            normalize_layers=normalize_layers, sink=sink, self_loops=self_loops, teleport=teleport, damping=damping,
            tol=tol, max_iter=max_iter, signed=signed, attention_power=attention_power, walks=walks,
            negative_weight=negative_weight, walk_gate=walk_gate, hub_power=hub_power,
            relevance_weight=relevance_weight,
        )

    # The options, read from the spec (one source of truth); setting one rebuilds the spec, checked again.
    def _option(name: str) -> property:  # type: ignore[misc]
        def get(self: "PageRankAttribution") -> Any:
            return getattr(self.spec, name)

        def set_(self: "PageRankAttribution", value: Any) -> None:
            self.spec = self.spec.replace(**{name: value})

        return property(get, set_, doc=f"The ``{name}`` option (see :class:`~captum_prxai.graph.spec.GraphSpec`).")

    edge_weight = _option("edge_weight")
    graph = _option("graph")
    damping = _option("damping")
    teleport = _option("teleport")
    residual = _option("residual")
    tol = _option("tol")
    max_iter = _option("max_iter")
    normalize_layers = _option("normalize_layers")
    sink = _option("sink")
    signed = _option("signed")
    self_loops = _option("self_loops")
    attention_power = _option("attention_power")
    walks = _option("walks")
    negative_weight = _option("negative_weight")
    walk_gate = _option("walk_gate")
    hub_power = _option("hub_power")
    relevance_weight = _option("relevance_weight")
    del _option

    # What the capture's pass does, resolved from "auto" by the layers; set to "auto" again, it is resolved again.
    def _pass_option(name: str, check: Callable[..., str], choices: tuple, rule: Callable[[bool, int], str],
                     doc: str) -> property:  # type: ignore[misc]
        def get(self: "PageRankAttribution") -> str:
            return self.__dict__["_" + name]

        def set_(self: "PageRankAttribution", value: str) -> None:
            if check(value, ("auto",) + choices) == "auto":
                value = rule(layers_are_causal(self.layers), len(self.layers))
            self.__dict__["_" + name] = value

        return property(get, set_, doc=doc)

    objective = _pass_option(  # type: ignore[assignment]
        "objective", check_objective, OBJECTIVES, auto_objective,
        """What the backward pass differentiates, resolved: ``"output"`` or ``"log_probability"``
        (:data:`captum_prxai.capture.OBJECTIVES`); setting ``"auto"`` resolves it again by the layers
        (:func:`~captum_prxai.graph.spec.auto_objective`), any other value is checked.""")
    propagation = _pass_option(  # type: ignore[assignment]
        "propagation", check_propagation, PROPAGATIONS, auto_propagation,
        """How the backward pass propagates, resolved: ``"gradient"`` or ``"conservative"``
        (:data:`captum_prxai.conservative.PROPAGATIONS`); setting ``"auto"`` resolves it again by the layers
        (:func:`~captum_prxai.graph.spec.auto_propagation`), any other value is checked.""")
    del _pass_option

    @property
    def head_reduction(self) -> str:  # type: ignore[override]
        """The ``head_reduction`` option (see :class:`~captum_prxai.graph.spec.GraphSpec`)."""
        spec = self.__dict__.get("spec")
        return spec.head_reduction if spec is not None else self.__dict__["_head_reduction"]

    @head_reduction.setter
    def head_reduction(self, value: str) -> None:
        spec = self.__dict__.get("spec")
        if spec is None:  # set by the base class before the spec exists
            self.__dict__["_head_reduction"] = value
        else:
            self.spec = spec.replace(head_reduction=value)

    # -- one graph pipeline ---------------------------------------------------------------------
    def _needs_gradients(self) -> bool:
        return self.spec.needs_gradients

    def _needs_input_gradient(self) -> bool:
        return self.spec.needs_input_gradient

    def _layer_map(self, layer: int, attention: Tensor, grad: Optional[Tensor]) -> Tensor:
        return self.spec.edge_map(attention, grad)

    def _layer_term(self) -> Optional[LayerTerm]:
        """The token graph is a sum over layers: the capture keeps the running sum, not ``L`` maps."""
        if self.spec.graph != "token":
            return None
        spec = self.spec
        return lambda edge_map, mask, causal: token_layer(spec, edge_map, mask, causal)

    def _token_scores(self, graph: CapturedGraph) -> Tensor:
        return score_graph(self.spec, build_graph(self.spec, graph))

    @log_usage(part_of_slo=True)
    def attribute_graph(
        self,
        inputs: Tensor,
        target: TargetType = None,
        additional_forward_args: Any = None,
        attention_mask: Optional[Tensor] = None,
        internal_batch_size: Optional[int] = None,
    ) -> GraphExplanation:
        r"""Like :meth:`attribute`, but also return the graph PageRank ran on, and the prediction.

        The same single pipeline as :meth:`attribute` (same arguments, same
        scores); the explorer's graph view and ``captum-prxai explain --graph``
        draw :attr:`GraphExplanation.adjacency`, so a picture always shows the
        scored graph.

        Returns:
            GraphExplanation: scores ``(B, T)`` (token ids only; embeddings
            inputs give per-token scores too), the built graph, the mask, the
            explained target and the logits.
        """
        inputs, targets, extra, mask, step = self._prepare(inputs, target, additional_forward_args, attention_mask,
                                                           internal_batch_size)
        parts = []
        for chunk in self._chunks(inputs, targets, extra, mask, step):
            captured = self._capture(*chunk)
            built = build_graph(self.spec, captured)
            parts.append((captured, built, score_graph(self.spec, built)))
        captured_all = [p[0] for p in parts]
        built = _cat_built([p[1] for p in parts])
        scores = torch.cat([p[2] for p in parts]) * mask.to(parts[0][2].dtype)
        logits = None if captured_all[0].logits is None else torch.cat([c.logits for c in captured_all])
        chosen = None if captured_all[0].target is None else torch.cat([c.target for c in captured_all])
        return GraphExplanation(scores=scores, built=built, spec=self.spec, mask=mask, target=chosen, logits=logits,
                                causal=captured_all[0].causal)

    @log_usage(part_of_slo=True)
    def attribute_long(
        self,
        input_ids: Tensor,
        target: TargetType = None,
        window: int = 512,
        stride: Optional[int] = None,
        prefix: int = 1,
        suffix: int = 1,
        internal_batch_size: Optional[int] = None,
        additional_forward_args: Any = None,
        attention_mask: Optional[Tensor] = None,
        show_progress: bool = False,
        return_logits: bool = False,
    ) -> Union[Tensor, tuple[Tensor, Tensor]]:
        r"""Score every token of texts longer than the model accepts, with stitched sliding windows.

        Each text (its real tokens, by the padding mask) is cut into
        overlapping windows of ``window`` tokens, each starting with the
        ``prefix`` and ending with the ``suffix`` special tokens of the text
        (``[CLS]`` and ``[SEP]`` for encoders; for decoders, the last token,
        whose output is explained, closes every window). The windows of a text
        run through ``forward_func(window_ids, *window_args)``, where every
        ``(B, N)`` tensor of ``additional_forward_args`` (e.g. the attention
        mask, token type ids) is cut into the same windows and other arguments
        are passed as they are. The text's prediction is the mean of its
        windows' logits, and each window explains its own ``objective`` for
        the text's target (its target logit, or its log-probability; see
        ``objective``). Each window's token graph is built by the same
        :func:`~captum_prxai.graph.spec.token_adjacency` as
        :meth:`attribute` uses (sink and self-loop policy included), mapped
        back to positions in the whole text and summed (overlaps count twice);
        one PageRank on the stitched graph, teleporting as ``teleport`` says
        to the explained token of the whole text, scores every token. Only
        the token graph is supported.

        Args:
            input_ids (Tensor): ``(B, N)`` (or ``(N,)``) integer ids, special tokens included.
            target (int, sequence of int or Tensor, optional): Class to explain
                per text; default: the predicted class (from the mean of the
                windows' logits, one extra forward pass).
            window (int): Tokens per window, at most the model's maximum. Default: 512.
            stride (int, optional): Content tokens between window starts.
                Default: half a window's content, so every token is seen twice.
            prefix (int): Leading special tokens repeated in every window. Default: 1.
            suffix (int): Trailing special tokens repeated in every window. Default: 1.
            internal_batch_size (int, optional): Windows per forward pass.
            additional_forward_args (Any, optional): Further arguments of
                ``forward_func`` for the whole texts, cut into windows as above.
                Default: none, but see ``attention_mask``.
            attention_mask (Tensor, optional): ``(B, N)`` padding mask; also
                found in ``additional_forward_args`` as in :meth:`attribute`.
                When ``additional_forward_args`` is ``None``, each window's
                (all-ones) mask is passed to ``forward_func`` as its second
                argument, for forward functions of the form
                ``forward(input_ids, attention_mask)``.
            show_progress (bool): Show a progress bar over the texts. Default: False.
            return_logits (bool): Also return the ``(B, C)`` predictions. Default: False.

        Returns:
            Tensor: ``(B, N)`` scores as :meth:`attribute` gives them (one walk: summing to one per text; two
            walks: ``P⁺ − λ P⁻``, summing to ``1 − λ``, before any relevance weight), zero on padding
            (and ``(B, C)`` logits with ``return_logits``).
        """
        spec = self.spec
        if spec.graph != "token":
            raise PRXAIError("attribute_long supports graph='token' only.")
        if not isinstance(input_ids, Tensor):
            raise PRXAIError(f"input_ids must be a tensor of token ids, got {type(input_ids).__name__}.")
        ids = input_ids.reshape(1, -1) if input_ids.dim() == 1 else input_ids
        if ids.is_floating_point() or ids.dim() != 2:
            raise PRXAIError(
                "attribute_long takes integer token ids of shape (B, N) or (N,); got a "
                f"{ids.dtype} tensor of shape {tuple(input_ids.shape)}."
            )
        _check_inputs(ids, self.layers)
        for name, value in (("window", window), ("prefix", prefix), ("suffix", suffix)):
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "window" else 0):
                raise PRXAIError(f"{name} must be a {'positive' if name == 'window' else 'non-negative'} int, got {value!r}.")
        if internal_batch_size is not None and (isinstance(internal_batch_size, bool) or
                                                not isinstance(internal_batch_size, int) or internal_batch_size < 1):
            raise PRXAIError(f"internal_batch_size must be a positive int, got {internal_batch_size!r}.")
        self._check_length(window)
        batch, length = ids.shape
        given_extra = additional_forward_args is not None
        extra = _format_additional_forward_args(additional_forward_args) or ()
        mask, self.mask_source_ = _find_attention_mask(attention_mask, extra, ids, self._pad_token_id())
        targets = _format_long_targets(target, batch, ids.device)
        content = window - prefix - suffix
        if stride is not None and (isinstance(stride, bool) or not isinstance(stride, int)):
            raise PRXAIError(f"stride must be an int, got {stride!r}.")
        progress = _progress(range(batch), show_progress, "attribute_long")
        scores = torch.zeros(batch, length, dtype=torch.float32, device=ids.device)
        all_logits: list[Tensor] = []
        for b in progress:
            real = mask[b].nonzero().squeeze(-1)
            text_scores, logits = self._attribute_one_long(
                ids[b, real], None if targets is None else int(targets[b]), window, stride or max(content // 2, 1),
                prefix, suffix, internal_batch_size, tuple(_take_text(a, b, real, batch, length) for a in extra),
                given_extra,
            )
            scores = scores.to(text_scores.dtype)
            scores[b, real] = text_scores
            all_logits.append(logits)
        if return_logits:
            return scores, torch.stack(all_logits)
        return scores

    def _attribute_one_long(self, ids: Tensor, target: Optional[int], window: int, stride: int, prefix: int,
                            suffix: int, internal_batch_size: Optional[int], extra: tuple,
                            given_extra: bool) -> tuple[Tensor, Tensor]:
        """Scores ``(n,)`` and mean window logits ``(C,)`` of one text's real ids ``(n,)``."""
        spec = self.spec
        length = ids.shape[0]
        plan = plan_windows(length, window, stride, prefix, suffix)
        positions = plan.positions.clamp(min=0).to(ids.device)
        window_mask = plan.mask.to(ids.device)
        window_ids = ids[positions] * window_mask
        windows = window_ids.shape[0]
        if given_extra:
            window_args = tuple(_cut(a, positions, window_mask, length, windows) for a in extra)
        else:
            window_args = (window_mask.long(),)
        step = internal_batch_size or windows
        check_memory(self.layers, min(step, windows), window_ids.shape[1], ids.device, self.capture,
                     self.attention_fn, summed=self._layer_term() is not None)
        if target is None:
            with torch.no_grad():
                logits = _logits(self.forward_func(window_ids, *window_args))
            target = int(logits.mean(0).argmax())
        graphs, saliency, logits_parts = [], [], []
        causal = False
        for start in range(0, windows, step):
            part = slice(start, start + step)
            count = window_ids[part].shape[0]
            captured = self._capture(
                window_ids[part], torch.full((count,), target, dtype=torch.long, device=ids.device),
                tuple(a[part] if isinstance(a, Tensor) and a.dim() > 0 and a.shape[0] == windows else a
                      for a in window_args),
                window_mask[part],
            )
            causal = captured.causal
            graphs.append(token_adjacency(spec, captured))
            logits_parts.append(captured.logits)
            if captured.input_gradient is not None:
                saliency.append(captured.input_gradient)
        graphs = torch.cat(graphs, dim=-3)  # (W, T, T), or (2, W, T, T) with the negative walk
        if spec.both_walks:
            adjacency, negative = (stitch_window_graphs(g, plan, length) for g in graphs)
        else:
            adjacency, negative = stitch_window_graphs(graphs, plan, length), None
        input_gradient = None
        if saliency:  # each token's gradient x input, summed over the windows that contain it
            values = torch.cat(saliency) * window_mask
            input_gradient = torch.zeros(1, length, dtype=values.dtype, device=ids.device)
            input_gradient[0].index_add_(0, positions.reshape(-1), values.reshape(-1))
        full = torch.ones(1, length, dtype=torch.bool, device=ids.device)
        explained = target_positions(full, causal, self.target_position)
        teleport = teleport_for(spec, full, explained, adjacency.dtype, input_gradient)
        built = BuiltGraph("token", full, teleport, adjacency=adjacency.unsqueeze(0), input_gradient=input_gradient,
                           negative=None if negative is None else negative.unsqueeze(0), target_position=explained)
        return score_graph(spec, built)[0], torch.cat(logits_parts).mean(0)

class PRAttention(PageRankAttribution):
    r"""PR-A: :class:`PageRankAttribution` with edges from the attention weights alone.

    Needs a single forward pass and no gradients; no hub weighting unless
    given ``hub_power``; ``objective`` (``"output"``) and ``propagation``
    (``"gradient"``) matter only where a backward pass runs
    (``teleport="input_gradient"``, ``signed=True``).
    Other keyword arguments as in :class:`PageRankAttribution`.
    """

    def __init__(self, forward_func: Callable, layers: Union[nn.Module, Sequence[nn.Module]],
                 hub_power: float = 0.0, objective: str = "output", propagation: str = "gradient",
                 relevance_weight: float = 0.0, **kwargs: Any) -> None:
        super().__init__(forward_func, layers, edge_weight="attention", hub_power=hub_power, objective=objective,
                         propagation=propagation, relevance_weight=relevance_weight, **kwargs)


class PRGradient(PageRankAttribution):
    r"""PR-G: :class:`PageRankAttribution` with edges from the positive attention gradients ``dA⁺``.

    One walk, on the positive edges (``walks="positive"``), unless given ``walks``; no gate on the walks
    unless given ``walk_gate``, no hub weighting unless given ``hub_power``, the output as returned (the
    logit) unless given ``objective``, the model's own gradient and no relevance weight unless given
    ``propagation`` and ``relevance_weight``.
    """

    def __init__(self, forward_func: Callable, layers: Union[nn.Module, Sequence[nn.Module]],
                 walks: str = "positive", walk_gate: Optional[float] = None, hub_power: float = 0.0,
                 objective: str = "output", propagation: str = "gradient",
                 relevance_weight: float = 0.0, **kwargs: Any) -> None:
        super().__init__(forward_func, layers, edge_weight="gradient", walks=walks, walk_gate=walk_gate,
                         hub_power=hub_power, objective=objective, propagation=propagation,
                         relevance_weight=relevance_weight, **kwargs)


class PRAttentionGradient(PageRankAttribution):
    r"""PR-AG: :class:`PageRankAttribution` with edges ``(A ⊙ dA)⁺``, attention times its gradient.

    The variant the PR-XAI paper reports as most faithful. One walk, on the
    positive edges, unless given ``walks``; no gate on the walks unless given
    ``walk_gate``, no hub weighting unless given ``hub_power``, the logit
    unless given ``objective``, the model's own gradient and no relevance
    weight unless given ``propagation`` and ``relevance_weight``. Other
    keyword arguments as in :class:`PageRankAttribution`.
    """

    def __init__(self, forward_func: Callable, layers: Union[nn.Module, Sequence[nn.Module]],
                 walks: str = "positive", walk_gate: Optional[float] = None, hub_power: float = 0.0,
                 objective: str = "output", propagation: str = "gradient",
                 relevance_weight: float = 0.0, **kwargs: Any) -> None:
        super().__init__(forward_func, layers, edge_weight="attention_gradient", walks=walks, walk_gate=walk_gate,
                         hub_power=hub_power, objective=objective, propagation=propagation,
                         relevance_weight=relevance_weight, **kwargs)


class PRTemperedAttentionGradient(PageRankAttribution):
    r"""PR-TAG: :class:`PageRankAttribution` with edges ``(A^γ ⊙ dA)⁺``, attention tempered by ``γ`` times its gradient.

    Between PR-G (``γ = 0``) and PR-AG (``γ = 1``); ``attention_power=γ``
    (default 0.5 on every model, chosen by the worst-case rule of
    docs/default_search.md; :class:`PageRankAttribution`'s ``"auto"`` gives
    0.25 on encoders of 12 or more layers). One walk, on the positive edges,
    unless given ``walks``: ``walks="both"`` is PR-TAG± (its
    ``negative_weight="auto"``: λ = 0.25 on encoders, 1 on decoders),
    :class:`PageRankAttribution`'s default on decoders. No gate on the walks
    unless given ``walk_gate``, no hub weighting unless given ``hub_power``,
    the logit unless given ``objective``, and the model's own gradient with no
    relevance weight unless given ``propagation`` and ``relevance_weight``:
    ``walks="both", hub_power=0.5, objective="log_probability",
    propagation="conservative", relevance_weight=1`` is the default on
    encoders of fewer than 12 layers, and the same with
    ``attention_power=0.25, walk_gate=0.5`` on encoders of 12 or more.
    Other keyword arguments as in :class:`PageRankAttribution`.
    """

    def __init__(self, forward_func: Callable, layers: Union[nn.Module, Sequence[nn.Module]],
                 walks: str = "positive", attention_power: float = DEFAULT_ATTENTION_POWER,
                 walk_gate: Optional[float] = None, hub_power: float = 0.0, objective: str = "output",
                 propagation: str = "gradient", relevance_weight: float = 0.0, **kwargs: Any) -> None:
        super().__init__(forward_func, layers, edge_weight="tempered_attention_gradient", walks=walks,
                         attention_power=attention_power, walk_gate=walk_gate, hub_power=hub_power,
                         objective=objective, propagation=propagation,
                         relevance_weight=relevance_weight, **kwargs)


# -- helpers of attribute_graph / attribute_long ------------------------------------------------------


def _cat_built(parts: list[BuiltGraph]) -> BuiltGraph:
    """Concatenate the built graphs of batch chunks."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]

    def cat(values: list[Optional[Tensor]]) -> Optional[Tensor]:
        return None if values[0] is None else torch.cat(values)  # type: ignore[arg-type]

    transitions = None
    if first.transitions is not None:
        transitions = [torch.cat(layer) for layer in zip(*(p.transitions for p in parts))]  # type: ignore[misc]
    return BuiltGraph(first.kind, torch.cat([p.mask for p in parts]), torch.cat([p.teleport for p in parts]),
                      adjacency=cat([p.adjacency for p in parts]), transitions=transitions,
                      input_gradient=cat([p.input_gradient for p in parts]),
                      negative=cat([p.negative for p in parts]),
                      target_position=cat([p.target_position for p in parts]))


def _format_long_targets(target: TargetType, batch: int, device: torch.device) -> Optional[Tensor]:
    targets = _format_target(target, batch, device)
    if targets is not None and (targets < 0).any():
        raise PRXAIError(f"target must be a non-negative class index, got {targets.tolist()}.")
    return targets


def _progress(items: range, show: bool, desc: str) -> Any:
    if not show:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, unit="text")


def _take_text(value: Any, b: int, real: Tensor, batch: int, length: int) -> Any:
    """Text ``b``'s part of a forward argument: its real positions of a ``(B, N, ...)`` tensor."""
    if isinstance(value, Tensor) and value.dim() >= 2 and value.shape[:2] == (batch, length):
        return value[b, real]
    if isinstance(value, Tensor) and value.dim() >= 1 and value.shape[0] == batch and batch > 1:
        return value[b]
    return value


def _cut(value: Any, positions: Tensor, window_mask: Tensor, length: int, windows: int) -> Any:
    """Cut a per-token ``(N, ...)`` argument of one text into ``(W, window, ...)`` windows."""
    if isinstance(value, Tensor) and value.dim() >= 1 and value.shape[0] == length:
        cut = value[positions]
        shape = window_mask.shape + (1,) * (cut.dim() - 2)
        return cut * window_mask.reshape(shape).to(cut.dtype) if cut.dtype != torch.bool else cut & window_mask
    return value


def _logits(output: Any) -> Tensor:
    if isinstance(output, (tuple, list)):
        output = output[0]
    return getattr(output, "logits", output)
