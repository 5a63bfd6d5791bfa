"""PR-XAI: PageRank over the attention graph (Azarkhalili, Li & Libbrecht, ACL 2026).

The flow of :class:`PageRankAttribution` is the one of the package, once:
:func:`~captum_prxai.capture.capture_graph` (one pass) ->
:func:`~captum_prxai.graph.build.build_graph` (the graph of its resolved
:class:`~captum_prxai.graph.spec.GraphSpec`) ->
:func:`~captum_prxai.graph.scoring.score_graph` (PageRank) -> token scores.
:meth:`PageRankAttribution.attribute_graph` returns the graph with the scores,
for pictures and checks; :meth:`PageRankAttribution.attribute_long` runs the
same steps over sliding windows.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional, Sequence, Union

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
from captum_prxai.capture import CapturedGraph, LayerTerm, check_memory, target_positions
from captum_prxai.exceptions import PRXAIError
from captum_prxai.graph.build import BuiltGraph, build_graph, teleport_for, token_adjacency, token_layer
from captum_prxai.graph.pagerank import pagerank
from captum_prxai.graph.scoring import apply_sign, hub_weighted, relevance_weighted, score_graph, walk_weights
from captum_prxai.graph.spec import DEFAULT_DAMPING, GraphSpec
from captum_prxai.graph.windows import plan_windows, stitch_window_graphs
from captum_prxai.hooks import AttentionExtractor
from captum_prxai.recommended import AUTO, TASKS, recommended_spec

__all__ = [
    "DEFAULT_DAMPING",
    "OPTION_NAMES",
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
        real nodes, the ``g`` that ``hub_power`` weighs by (:func:`~captum_prxai.graph.scoring.hub_weighted`)."""
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
        the positive walk alone, as :func:`~captum_prxai.graph.scoring.walk_weights` decided when scoring), else
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
        pass's gradient x input (``relevance_weight`` ``w``; :func:`~captum_prxai.graph.scoring.relevance_weighted`),
        all ones without it."""
        ones = torch.ones(self.mask.shape, dtype=torch.float64, device=self.mask.device)
        if not self.spec.relevance_weight:
            return ones
        return relevance_weighted(self.spec, ones, self.built.input_gradient.double(), self.mask)



#: The options of :class:`PageRankAttribution`: the fields of :class:`~captum_prxai.graph.spec.GraphSpec`.
OPTION_NAMES: tuple[str, ...] = tuple(name for name in GraphSpec.__dataclass_fields__ if not name.startswith("_"))


class PageRankAttribution(AttentionGraphAttribution):
    r"""PR-XAI: token scores from personalised PageRank on the attention graph.

    One forward pass, and one backward pass for gradient edges, are recorded with hooks on the attention
    layers. Each layer's attention ``A`` and its gradient ``dA`` give edges ``i → j`` (token ``i`` attends to
    ``j``); summed over layers they form the token graph, whose row-normalised transitions are ``P``. The
    walk teleports to the explained token ``t`` (``[CLS]``, or a decoder's last token) with damping ``d``:

    .. math::

        x = (1 - d)\, e_t + d\, P^\top x

    The paper's PR-AG (``spec=GraphSpec()``) returns ``x`` on the edges ``(A ⊙ dA)⁺``. The default,
    measured per architecture (:func:`~captum_prxai.recommended_spec`), walks the negative edges
    ``W(A, −dA)`` too, weighs each walk by its graph's hubs ``g`` and each token by its gradient x input
    ``R``: ``s = (x⁺ ⊙ g⁺ᵖ − λ x⁻ ⊙ g⁻ᵖ) ⊙ (1 + w R / max|R|)``, signed
    (:mod:`captum_prxai.graph.scoring` gives the steps). Padding gets exactly zero.

    Args:
        forward_func (Callable): Returns logits ``(B, C)``; called as
            ``forward_func(inputs, *additional_forward_args)``.
        layers (nn.Module or sequence of nn.Module): The attention modules, first layer first
            (:func:`captum_prxai.attention_layers`).
        spec (GraphSpec, optional): Every graph option at once; used as given, nothing is resolved.
        target_position (str or int): The explained token: ``"auto"`` (the first token for encoders, the
            last real one for decoders), ``"first"``, ``"last"`` or an index.
        attention_fn, capture, pad_token_id: See
            :class:`~captum_prxai.attr._base.AttentionGraphAttribution`.
        **options: Any :class:`~captum_prxai.graph.spec.GraphSpec` field (``edge_weight``, ``walks``,
            ``damping``, ``teleport``, ...). Each one left out is ``"auto"``, filled in for the model of
            ``layers`` by :func:`~captum_prxai.recommended_spec` when the attribution runs. They are stored
            as given (``pr.walks`` is what you passed); :meth:`resolve` returns the spec that runs.

    Returns (from :meth:`attribute`):
        Tensor: ``(B, T)`` scores (fp32, or fp64 for a fp64 model), exactly zero on padding.

    Example::

        >>> pr = PageRankAttribution(forward, attention_layers(model))
        >>> scores = pr.attribute(input_ids, target=1, additional_forward_args=(mask,), attention_mask=mask)
        >>> pr.resolve()                                    # the GraphSpec that produced them
        >>> PageRankAttribution(forward, layers, spec=GraphSpec())  # the paper's PR-AG

    References:
        B. Azarkhalili, L. Li, M. W. Libbrecht. *PR-XAI: PageRank-Based Feature Attribution for
        Transformers.* ACL 2026.
        L. Page, S. Brin, R. Motwani, T. Winograd. *The PageRank citation ranking.* 1999.
    """

    #: options this class fixes unless given (the presets); the others default to ``"auto"``
    _fixed: ClassVar[dict[str, Any]] = {}

    def __init__(
        self,
        forward_func: Callable,
        layers: Union[nn.Module, Sequence[nn.Module]],
        spec: Optional[GraphSpec] = None,
        *,
        target_position: Union[str, int] = "auto",
        attention_fn: Optional[AttentionExtractor] = None,
        capture: str = "auto",
        pad_token_id: Optional[int] = None,
        **options: Any,
    ) -> None:
        unknown = sorted(set(options) - set(OPTION_NAMES))
        if unknown:
            raise PRXAIError(f"{type(self).__name__} got unknown option(s) {', '.join(map(repr, unknown))}; the "
                             f"options are the fields of GraphSpec: {', '.join(OPTION_NAMES)}.")
        if spec is not None and not isinstance(spec, GraphSpec):
            raise PRXAIError(f"spec must be a GraphSpec, got {type(spec).__name__}.")
        if spec is not None and options:
            raise PRXAIError("give either spec or options, not both: spec holds every option "
                             f"(use spec.replace({', '.join(f'{k}=...' for k in sorted(options))})).")
        super().__init__(forward_func, layers, attention_fn, "mean", target_position, capture, pad_token_id)
        self.__dict__["_options"] = {name: options.get(name, self._fixed.get(name, AUTO)) for name in OPTION_NAMES}
        self.__dict__["_given_spec"] = spec
        self.resolve()  # a bad option fails here, before any pass through the model

    @classmethod
    def default_options(cls) -> dict[str, Any]:
        """``{option: value}`` this class runs with when given none: ``"auto"``, or a preset's fixed value."""
        return {name: cls._fixed.get(name, AUTO) for name in OPTION_NAMES}

    def get_params(self) -> dict[str, Any]:
        """The options as given (``"auto"`` where left out), and ``spec`` (``None`` unless given)."""
        return {**self.__dict__["_options"], "spec": self.__dict__["_given_spec"]}

    def resolve(self, model: Optional[nn.Module] = None, task: Optional[str] = None) -> GraphSpec:
        """The :class:`~captum_prxai.graph.spec.GraphSpec` that :meth:`attribute` runs with: the given ``spec``, or
        the options with every ``"auto"`` filled in by :func:`~captum_prxai.recommended_spec` for ``model``
        (default: the model of ``layers``) and ``task`` (default: this attribution's, ``"classification"``
        unless it is the copy that :meth:`for_task` made). Nothing is stored on the attribution's public
        attributes."""
        given = self.__dict__["_given_spec"]
        if given is not None:
            return given
        options = self.__dict__["_options"]
        task = self.__dict__.get("_task", TASKS[0]) if task is None else task
        if model is not None:
            return recommended_spec(model, task=task, **options)
        key = (task,) + tuple((name, id(value) if isinstance(value, Tensor) or callable(value) else value)
                              for name, value in options.items())
        memo = self.__dict__.get("_resolved")
        if memo is not None and memo[0] == key:
            return memo[1]
        spec = recommended_spec(self.layers, task=task, **options)
        self.__dict__["_resolved"] = (key, spec)
        return spec

    def for_task(self, task: str) -> "PageRankAttribution":
        """A copy that resolves its ``"auto"`` options for ``task`` (:data:`~captum_prxai.recommended.TASKS`):
        :class:`~captum_prxai.llm.LLMGraphAttribution` runs its rows with ``for_task("generation")``. Options
        given explicitly, and a given ``spec``, are kept as they are."""
        if task not in TASKS:
            raise PRXAIError(f"task must be one of {', '.join(map(repr, TASKS))}, got {task!r}.")
        new = copy.copy(self)
        new.__dict__["_task"] = task
        return new

    def __copy__(self) -> "PageRankAttribution":
        """A shallow copy with its own options: setting an option on the copy leaves the original as it is."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__["_options"] = dict(self.__dict__["_options"])
        new.__dict__.pop("_resolved", None)
        return new

    @property
    def spec(self) -> GraphSpec:
        """The resolved :class:`~captum_prxai.graph.spec.GraphSpec` (:meth:`resolve`), read-only."""
        return self.resolve()

    @staticmethod
    def _option(name: str) -> property:
        def get(self: "PageRankAttribution") -> Any:
            return self.__dict__["_options"][name]

        def set_(self: "PageRankAttribution", value: Any) -> None:
            if "_options" not in self.__dict__:  # the base class sets head_reduction before the options exist
                return
            if self.__dict__["_given_spec"] is not None:
                raise PRXAIError(f"this attribution runs the spec it was given; set spec.replace({name}=...) "
                                 "through a new attribution instead.")
            previous = self.__dict__["_options"][name]
            self.__dict__["_options"][name] = value
            try:
                self.resolve()  # checked now, as in the constructor
            except PRXAIError:
                self.__dict__["_options"][name] = previous
                raise

        return property(get, set_, doc=f"The ``{name}`` option as given (see :class:`~captum_prxai.GraphSpec`).")

    def _backward_options(self) -> tuple[str, str]:
        spec = self.spec
        return spec.objective, spec.propagation

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
        :func:`~captum_prxai.graph.build.token_adjacency` as
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
        if stride is not None and (isinstance(stride, bool) or not isinstance(stride, int) or stride < 1):
            raise PRXAIError(f"stride must be a positive int (or None for half a window's content), got {stride!r}.")
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


for _name in OPTION_NAMES:  # each option is a property over the stored, as-given value
    setattr(PageRankAttribution, _name, PageRankAttribution._option(_name))
del _name

#: what every preset fixes: the paper's method on its edges (one walk, the output as returned, the model's own
#: gradient, no hub or relevance weight), with ``negative_weight`` left to the rules for ``walks="both"``
_PLAIN = {"walks": "positive", "walk_gate": None, "hub_power": 0.0, "objective": "output",
          "propagation": "gradient", "relevance_weight": 0.0, "attention_power": 0.5}


class _Preset(PageRankAttribution):
    """A preset: :class:`PageRankAttribution` with its edge weight fixed, the other options of
    :class:`~captum_prxai.graph.spec.GraphSpec`'s plain method unless given."""

    def __init__(self, forward_func: Callable, layers: Union[nn.Module, Sequence[nn.Module]], **options: Any) -> None:
        if "edge_weight" in options or "spec" in options:
            raise PRXAIError(f"{type(self).__name__} fixes edge_weight={self._fixed['edge_weight']!r}; use "
                             "PageRankAttribution to choose the edges or pass a spec.")
        super().__init__(forward_func, layers, **options)


class PRAttention(_Preset):
    r"""PR-A: :class:`PageRankAttribution` on the attention weights alone, ``A``.

    One forward pass and no gradient, unless ``teleport="input_gradient"`` or ``signed=True`` asks for one.
    Other options as in :class:`PageRankAttribution`, each the plain method's unless given.
    """

    _fixed = {**_PLAIN, "edge_weight": "attention"}


class PRGradient(_Preset):
    r"""PR-G: :class:`PageRankAttribution` on the positive attention gradients, ``dA⁺``.

    One walk unless given ``walks="both"``; other options as in :class:`PageRankAttribution`, each the plain
    method's unless given.
    """

    _fixed = {**_PLAIN, "edge_weight": "gradient"}


class PRAttentionGradient(_Preset):
    r"""PR-AG: :class:`PageRankAttribution` on attention times its gradient, ``(A ⊙ dA)⁺``.

    The variant the PR-XAI paper reports as most faithful; ``GraphSpec()``. One walk unless given
    ``walks="both"``; other options as in :class:`PageRankAttribution`, each the plain method's unless given.
    """

    _fixed = {**_PLAIN, "edge_weight": "attention_gradient"}


class PRTemperedAttentionGradient(_Preset):
    r"""PR-TAG: :class:`PageRankAttribution` on tempered attention times its gradient, ``(A^γ ⊙ dA)⁺``.

    Between PR-G (``γ = 0``) and PR-AG (``γ = 1``); ``attention_power=γ``, 0.5 unless given. One walk unless
    given ``walks="both"`` (PR-TAG±, with ``negative_weight`` λ); other options as in
    :class:`PageRankAttribution`, each the plain method's unless given.
    """

    _fixed = {**_PLAIN, "edge_weight": "tempered_attention_gradient"}


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
