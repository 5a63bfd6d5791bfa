"""Maximum flow through the layered attention graph (attention flow, Abnar & Zuidema 2020).

The layered graph has a node ``(l, i)`` for token ``i`` at the input of layer
``l`` (``l = 0`` are the input tokens, ``l = L`` the last layer's outputs). An
edge ``(l + 1, i) -> (l, j)`` has capacity ``M_l[i, j]``, the share of token
``j`` in what token ``i`` reads at layer ``l``. The attention flow of input
token ``j`` is the value of a maximum flow from the explained output node
``(L, t)`` to ``(0, j)``: unlike rollout (a product of the maps), it is capped
by the narrowest layer of every path.

Costs one maximum-flow problem per input token, on a graph of ``(L + 1) T``
nodes and ``L T^2`` edges, solved on the CPU by SciPy's Dinic algorithm.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np
import torch
from torch import Tensor

from captum_prxai._checks import value_range
from captum_prxai.exceptions import PRXAIError

__all__ = ["layered_max_flow", "FLOW_RESOLUTION"]

#: Capacities are fractions scaled to integers with this resolution (SciPy's max flow is integral).
FLOW_RESOLUTION = 1_000_000


def _maximum_flow():
    try:
        from scipy.sparse import csr_array
        from scipy.sparse.csgraph import maximum_flow
    except ImportError as err:  # pragma: no cover - scipy is a dependency
        raise PRXAIError("attention flow needs SciPy: pip install scipy") from err
    return csr_array, maximum_flow


def layered_max_flow(
    transitions: list[Tensor],
    mask: Tensor,
    source_position: Tensor,
    resolution: int = FLOW_RESOLUTION,
    progress: Optional[Callable[[int, int], None]] = None,
) -> Tensor:
    """Attention flow: the maximum flow from the explained output token to each input token.

    Args:
        transitions: Per layer, first layer first, ``(B, T, T)`` non-negative
            capacities; row ``i`` of layer ``l`` holds what token ``i`` reads at
            layer ``l`` (e.g. ``0.5 A + 0.5 I``, rows summing to 1).
        mask: ``(B, T)`` real-token mask; padding takes no part in the graph.
        source_position: ``(B,)`` index of the explained token at the top.
        resolution: Capacities are rounded to multiples of ``1 / resolution``.
        progress: Optional callable ``progress(done, total)`` called per token.

    Returns:
        ``(B, T)`` flow values in ``[0, 1]`` (capacity units), zero on padding.

    Raises:
        PRXAIError: Negative or non-finite capacities, no layers, or a source
            position that is padding.

    References:
        S. Abnar, W. Zuidema. *Quantifying Attention Flow in Transformers.* ACL 2020.
    """
    csr_array, maximum_flow = _maximum_flow()
    if not transitions:
        raise PRXAIError("attention flow needs at least one layer of transitions.")
    batch, length, _ = transitions[0].shape
    stacked = torch.stack([t.detach() for t in transitions], dim=1).to("cpu", torch.float64)  # (B, L, T, T)
    low, high = value_range(stacked) if stacked.numel() else (0.0, 0.0)
    if not (math.isfinite(low) and math.isfinite(high)) or low < 0:
        raise PRXAIError("attention flow capacities must be finite and non-negative.")
    n_layers = stacked.shape[1]
    out = torch.zeros(batch, length, dtype=torch.float64)
    valid_all = mask.detach().to("cpu").bool()
    for b in range(batch):
        real = torch.nonzero(valid_all[b]).flatten()
        n = int(real.numel())
        if n == 0:
            continue
        caps = stacked[b][:, real][:, :, real]  # (L, n, n)
        weights = np.rint(caps.numpy() * resolution).astype(np.int32)
        # node id of (layer l, token i) = l * n + i; edge (l + 1, i) -> (l, j) for layer l's map.
        layer, row, col = np.nonzero(weights)
        graph = csr_array(
            (weights[layer, row, col], ((layer + 1) * n + row, layer * n + col)),
            shape=((n_layers + 1) * n, (n_layers + 1) * n),
        )
        graph.sort_indices()
        at = torch.nonzero(real == int(source_position[b])).flatten()
        if at.numel() == 0:
            raise PRXAIError(f"source position {int(source_position[b])} of example {b} is padding.")
        source = n_layers * n + int(at[0])
        for j in range(n):
            flow = maximum_flow(graph, source, j, method="dinic").flow_value
            out[b, real[j]] = flow / resolution
            if progress is not None:
                progress(j + 1, n)
    return out.to(transitions[0].dtype if transitions[0].is_floating_point() else torch.float32)
