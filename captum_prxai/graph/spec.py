"""What decides a PR-XAI graph and its PageRank, as one value: :class:`GraphSpec`.

The flow, once for every consumer (``attribute``, ``attribute_long``, the explorer, the CLI, the benchmark, the
LLM wrapper and the dataset runner):

1. capture one pass (:func:`captum_prxai.capture.capture_graph`); its hooks call :meth:`GraphSpec.edge_map` as
   each layer's attention ``A`` and gradient ``dA`` arrive;
2. build the graph (:func:`captum_prxai.graph.build.build_graph`);
3. score it (:func:`captum_prxai.graph.scoring.score_graph`).

``GraphSpec()`` is the paper's PR-AG: one personalised PageRank walk on ``(A ⊙ dA)⁺`` edges, explaining the
output as returned. The measured default of :class:`~captum_prxai.PageRankAttribution` is a spec too, returned
for a model by :func:`captum_prxai.recommended_spec`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional, Union

import torch
from torch import Tensor

from captum_prxai.capture import OBJECTIVES, check_objective
from captum_prxai.conservative import PROPAGATIONS, check_propagation
from captum_prxai.exceptions import PRXAIError
from captum_prxai.graph.builders import GRAPHS, TELEPORTS
from captum_prxai.graph.edges import HEAD_REDUCTIONS, EdgeWeight, edge_weight_fn, reduce_heads

__all__ = [
    "DEFAULT_DAMPING",
    "WALKS",
    "GraphSpec",
    "has_negative_walk",
    "layer_edge_map",
]

#: PageRank damping of every spec unless given (0.5-0.95 measured; docs/benchmarks.md).
DEFAULT_DAMPING = 0.7

_POLICIES = ("auto", "keep", "drop")
#: the walks of a PR-XAI graph: the positive edges only, or both signs (scores = positive - negative PageRank)
WALKS = ("positive", "both")
#: edge weights with a negative walk (``W(A, -dA)``: the part of the gradient that argues against the target)
_SIGNED_EDGES = ("gradient", "attention_gradient", "tempered_attention_gradient")


def has_negative_walk(edge_weight: Union[str, EdgeWeight], graph: str = "token", signed: bool = False) -> bool:
    """Whether these options can walk both signs: a built-in gradient edge weight, on the token graph, unsigned.

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
    r"""Everything that decides a PR-XAI graph and its scores, as one checked value.

    Each field's default is the neutral choice, so ``GraphSpec()`` is the paper's PR-AG: one personalised
    PageRank walk (damping 0.7, teleport to the explained token) on the token graph whose edges are
    ``(A ⊙ dA)⁺`` averaged over heads and summed over layers. The scoring steps each field turns on are
    listed in :mod:`captum_prxai.graph.scoring`.

    Args:
        edge_weight (str or callable): ``"attention"`` (``A``), ``"gradient"`` (``dA⁺``),
            ``"attention_gradient"`` (``(A ⊙ dA)⁺``), ``"tempered_attention_gradient"`` (``(A^γ ⊙ dA)⁺``,
            ``γ = attention_power``), ``"gradient_abs"``, ``"attention_gradient_abs"``, or a callable
            ``(A, dA) -> W`` on per-head ``(B, H, T, T)`` tensors returning non-negative ``(B, H, T, T)``
            (or head-reduced ``(B, T, T)``) weights. Default: ``"attention_gradient"``.
        head_reduction (str): ``"mean"``, ``"sum"`` or ``"max"``. Default: ``"mean"``.
        graph (str): ``"token"`` (one node per token, layers summed) or ``"layered"`` (one node per token and
            layer). Default: ``"token"``.
        residual (float, optional): Residual self-edge weight in ``[0, 1)``; ``None``: 0 for the token graph,
            0.5 for the layered graph.
        normalize_layers (bool): Token graph: scale each layer to unit mass before summing. Default: False.
        sink (str): ``"auto"`` (drop the edges into the first token under causal attention only), ``"keep"``
            or ``"drop"``.
        self_loops (str): Token graph: ``"auto"`` (drop under causal attention only), ``"keep"`` or ``"drop"``.
        teleport (str or Tensor): ``"target"`` (the explained token), ``"uniform"``, ``"input_gradient"``
            (positive gradient x input) or a ``(B, T)`` / ``(T,)`` weight tensor. Default: ``"target"``.
        damping (float): PageRank damping in ``[0, 1)``. Default: 0.7.
        tol (float): PageRank tolerance, positive. Default: 1e-6.
        max_iter (int): PageRank iteration limit, at least 1. Default: 100.
        signed (bool): One walk: give each score the sign of its token's gradient x input. Default: False.
        attention_power (float): ``γ`` in ``[0, 2]`` of ``"tempered_attention_gradient"``. Default: 0.5.
        walks (str): ``"positive"`` (one walk) or ``"both"``: a second walk on the negative edges
            ``W(A, −dA)``, where more attention would lower the target; the scores are then ``s⁺ − λ s⁻``,
            signed. Token graph and gradient edges only (:func:`has_negative_walk`). Default: ``"positive"``.
        negative_weight (float): ``λ ≥ 0``, the weight of the negative walk. Default: 1.
        walk_gate (float, optional): Two walks: per example, ``λ = 0`` where the two walks' PageRank correlate
            above this value in ``[-1, 1]`` over the real tokens other than the explained one. Default: ``None``.
        hub_power (float): Token graph: each walk's PageRank ``x`` times its graph's global PageRank ``g`` to
            this power ``p`` in ``[0, 2]``, ``x ⊙ g^p`` renormalised. Default: 0.
        relevance_weight (float): Each score times ``1 + w · R / max|R|``, ``R`` the gradient x input at the
            first attention layer, ``w`` in ``[0, 1]``. Default: 0.
        objective (str): What the backward pass differentiates: ``"output"`` (the target's output as
            returned, e.g. its logit) or ``"log_probability"`` (``log softmax(z)_t``). Default: ``"output"``.
        propagation (str): ``"gradient"`` (the model's own backward pass) or ``"conservative"`` (every
            attention softmax and LayerNorm scale held constant in the backward pass, CP-LRP's; Ali et al.,
            ICML 2022). Default: ``"gradient"``.

    All values are checked here, so a bad option fails before any pass through the model.

    Example::

        >>> GraphSpec()                                   # PR-AG, as in the paper
        >>> GraphSpec(edge_weight="attention")            # PR-A: one forward pass, no gradient
        >>> recommended_spec(model)                       # the measured default for this model

    References:
        B. Azarkhalili, L. Li, M. W. Libbrecht. *PR-XAI: PageRank-Based Feature Attribution for
        Transformers.* ACL 2026.
    """

    edge_weight: Union[str, EdgeWeight] = "attention_gradient"
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
    attention_power: float = 0.5
    walks: str = "positive"
    negative_weight: float = 1.0
    walk_gate: Optional[float] = None
    hub_power: float = 0.0
    relevance_weight: float = 0.0
    objective: str = "output"
    propagation: str = "gradient"
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
        check_objective(self.objective, OBJECTIVES)
        check_propagation(self.propagation, PROPAGATIONS)
        if self.walks == "both":  # refuse what has no negative walk
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

    def as_dict(self) -> dict[str, Any]:
        """``{field: value}`` of every option, as resolved (e.g. to compare two specs, or to log one)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__ if not name.startswith("_")}

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

