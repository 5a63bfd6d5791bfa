"""Step 2 of the flow: a captured pass -> the graph PageRank runs on (:func:`build_graph`).

:func:`token_layer` is one layer's term of the token graph (the capture sums the terms as the layers arrive),
:func:`token_adjacency` their sum, :func:`build_graph` the whole graph with its teleport vector, held in a
:class:`BuiltGraph`. Step 3, :func:`captum_prxai.graph.scoring.score_graph`, scores it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import torch
from torch import Tensor

from captum_prxai.exceptions import PRXAIError
from captum_prxai.graph.builders import (
    drop_self_loops,
    drop_sink_edges,
    layered_transitions,
    teleport_vector,
    token_graph,
)
from captum_prxai.graph.spec import GraphSpec

if TYPE_CHECKING:  # pragma: no cover
    from captum_prxai.capture import CapturedGraph

__all__ = ["BuiltGraph", "build_graph", "teleport_for", "token_adjacency", "token_layer"]


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
    target_position: Optional[Tensor] = None  #: ``(B,)`` the explained token (left out of the walks' correlation)

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


