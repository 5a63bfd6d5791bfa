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

:func:`layered_barrier_flow` (generalized attention flow, Azarkhalili &
Libbrecht 2025) instead solves one maximum flow from all input tokens at once
by the log-barrier method (:func:`barrier_max_flow`), whose limit picks the
unique analytic centre among the maximum flows.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from captum_prxai._checks import value_range
from captum_prxai.exceptions import PRXAIError

__all__ = ["layered_max_flow", "FLOW_RESOLUTION", "barrier_max_flow", "layered_barrier_flow"]

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
    stacked = _stacked_capacities(transitions, "attention flow")  # (B, L, T, T)
    batch, n_layers, length, _ = stacked.shape
    out = torch.zeros(batch, length, dtype=torch.float64)
    for b, real, caps in _real_tokens(stacked, mask):
        n = int(real.numel())
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


# ---------------------------------------------------------------------- barrier maximum flow
def _topological_order(n_nodes: int, tail: np.ndarray, head: np.ndarray) -> np.ndarray:
    """Kahn's algorithm; raises if the graph has a cycle."""
    order = np.argsort(tail, kind="stable")
    starts = np.searchsorted(tail[order], np.arange(n_nodes + 1))
    indegree = np.bincount(head, minlength=n_nodes)
    ready = list(np.flatnonzero(indegree == 0))
    out: list = []
    while ready:
        node = ready.pop()
        out.append(node)
        succ = head[order[starts[node] : starts[node + 1]]]
        np.subtract.at(indegree, succ, 1)
        ready.extend(int(v) for v in np.unique(succ[indegree[succ] == 0]))
    if len(out) != n_nodes:
        raise PRXAIError("barrier_max_flow needs an acyclic graph (a layered attention graph is one).")
    return np.asarray(out, dtype=np.int64)


def _reachable(n_nodes: int, tail: np.ndarray, head: np.ndarray, start: int) -> np.ndarray:
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import breadth_first_order

    graph = csr_array((np.ones(tail.size), (tail, head)), shape=(n_nodes, n_nodes))
    seen = np.zeros(n_nodes, dtype=bool)
    seen[breadth_first_order(graph, start, directed=True, return_predecessors=False)] = True
    return seen


def _solve_spd(tail: np.ndarray, head: np.ndarray, weight: np.ndarray, n_nodes: int, rhs: np.ndarray) -> np.ndarray:
    """Solve ``(A diag(weight) A^T) w = rhs`` for the node-edge incidence ``A`` (a grounded weighted Laplacian).

    The matrix is scaled to a unit diagonal first (its entries span many
    orders of magnitude near the optimum), factored by banded Cholesky when
    the nodes are numbered so that edges are short (a layered graph numbered
    layer by layer: bandwidth < 2 T) and densely otherwise, and the solution
    is refined once.
    """
    from scipy.linalg import cho_factor, cho_solve, cholesky_banded, cho_solve_banded

    inner = (tail >= 0) & (head >= 0)
    ti, hi, wi = tail[inner], head[inner], weight[inner]
    diag = np.bincount(tail[tail >= 0], weight[tail >= 0], minlength=n_nodes)
    diag += np.bincount(head[head >= 0], weight[head >= 0], minlength=n_nodes)
    scale = 1.0 / np.sqrt(np.maximum(diag, 1e-300))
    off = -wi * scale[ti] * scale[hi]
    band = int(np.abs(ti - hi).max()) if ti.size else 0

    def matvec(x: np.ndarray) -> np.ndarray:
        y = x.copy()
        np.add.at(y, ti, off * x[hi])
        np.add.at(y, hi, off * x[ti])
        return y

    if 3 * band < n_nodes:
        ab = np.zeros((band + 1, n_nodes))
        ab[band] = 1.0 + 1e-14
        lo, up = np.minimum(ti, hi), np.maximum(ti, hi)
        np.add.at(ab, (band - (up - lo), up), off)
        factor = cholesky_banded(ab, lower=False, check_finite=False)

        def solve(b: np.ndarray) -> np.ndarray:
            return cho_solve_banded((factor, False), b, check_finite=False)
    else:
        dense = np.zeros((n_nodes, n_nodes))
        np.add.at(dense, (ti, hi), off)
        np.add.at(dense, (hi, ti), off)
        dense[np.diag_indices(n_nodes)] += 1.0 + 1e-14
        factor = cho_factor(dense, check_finite=False)

        def solve(b: np.ndarray) -> np.ndarray:
            return cho_solve(factor, b, check_finite=False)

    b = rhs * scale
    x = solve(b)
    x = x + solve(b - matvec(x))
    return x * scale


def barrier_max_flow(
    tail: np.ndarray,
    head: np.ndarray,
    capacity: np.ndarray,
    n_nodes: int,
    source: int,
    sink: int,
    tol: float = 1e-7,
    max_newton: int = 500,
    on_newton_step: Optional[Callable[[], None]] = None,
) -> Tuple[np.ndarray, float]:
    r"""Maximum flow of an acyclic graph by the log-barrier (interior-point) method.

    Solves, for increasing :math:`t`,

    .. math:: \min_f\ -t\,\mathrm{val}(f) - \sum_e \log f_e - \sum_{e:\,c_e<\infty} \log(c_e - f_e)
              \quad\text{s.t. inflow = outflow at every node but } s, t,

    by Newton's method (each step solves a weighted Laplacian system of the
    nodes), multiplying :math:`t` by 10 until the duality gap :math:`m/t`
    (``m`` edges) falls below ``tol`` times the flow value. The flow value is
    then within ``tol`` (relative) of the maximum, and the flow is close to
    the barrier's limit, the analytic centre of the optimal flows: a unique
    maximum flow, whereas combinatorial algorithms return an arbitrary one.
    Edges on no path from ``source`` to ``sink``, and edges of zero capacity,
    carry no flow and are left out.

    Args:
        tail: ``(m,)`` start node of each edge.
        head: ``(m,)`` end node of each edge.
        capacity: ``(m,)`` non-negative capacities; ``inf`` for unbounded edges
            (every source-sink path must cross a finite one).
        n_nodes: Number of nodes, numbered ``0 .. n_nodes - 1``.
        source: Source node.
        sink: Sink node.
        tol: Relative duality gap at which to stop.
        max_newton: Newton steps allowed in all.
        on_newton_step: Called once per Newton step (one Laplacian solve), e.g. to count them.

    Returns:
        ``(flow, value)``: the ``(m,)`` flow on each edge and the flow value.

    Raises:
        PRXAIError: Bad shapes, negative or NaN capacities, a cycle, an
            unbounded path, or no convergence within ``max_newton`` steps.

    References:
        S. Boyd, L. Vandenberghe. *Convex Optimization*, ch. 11 (barrier method). 2004.
        B. Azarkhalili, M. Libbrecht. *Generalized Attention Flow: Feature
        Attribution for Transformer Models via Maximum Flow.* ACL 2025.
    """
    tail = np.asarray(tail, dtype=np.int64).reshape(-1)
    head = np.asarray(head, dtype=np.int64).reshape(-1)
    cap = np.asarray(capacity, dtype=np.float64).reshape(-1)
    if not (tail.shape == head.shape == cap.shape):
        raise PRXAIError(f"tail, head and capacity must have one entry per edge, got sizes "
                         f"{tail.size}, {head.size}, {cap.size}.")
    if tail.size and (min(tail.min(), head.min()) < 0 or max(tail.max(), head.max()) >= n_nodes):
        raise PRXAIError(f"edge endpoints must lie in 0..{n_nodes - 1}.")
    if np.isnan(cap).any() or (cap < 0).any():
        raise PRXAIError("barrier_max_flow capacities must be non-negative numbers (inf for unbounded).")
    if source == sink or not (0 <= source < n_nodes and 0 <= sink < n_nodes):
        raise PRXAIError(f"source and sink must be two different nodes in 0..{n_nodes - 1}, got {source}, {sink}.")
    flow = np.zeros(tail.size)
    if tail.size == 0:
        return flow, 0.0
    _topological_order(n_nodes, tail, head)
    live = (cap > 0) & (tail != sink) & (head != source)
    ahead = _reachable(n_nodes, tail[live], head[live], source)
    behind = _reachable(n_nodes, head[live], tail[live], sink)
    live &= ahead[tail] & behind[head]
    if not live.any():
        return flow, 0.0
    t_e, h_e, c_e = tail[live], head[live], cap[live]
    finite = np.isfinite(c_e)
    # a strictly feasible start: flow of every path weighted by the product of min(c, 1) along it
    weight = np.where(finite, np.minimum(c_e, 1.0), 1.0)
    order = _topological_order(n_nodes, t_e, h_e)
    reach_s, reach_t = np.zeros(n_nodes), np.zeros(n_nodes)
    reach_s[source] = reach_t[sink] = 1.0
    by_tail = np.argsort(t_e, kind="stable")
    tail_starts = np.searchsorted(t_e[by_tail], np.arange(n_nodes + 1))
    by_head = np.argsort(h_e, kind="stable")
    head_starts = np.searchsorted(h_e[by_head], np.arange(n_nodes + 1))
    for node in order:
        into = by_head[head_starts[node] : head_starts[node + 1]]
        if into.size:
            reach_s[node] = float(np.dot(reach_s[t_e[into]], weight[into]))
    for node in order[::-1]:
        out = by_tail[tail_starts[node] : tail_starts[node + 1]]
        if out.size:
            reach_t[node] = float(np.dot(reach_t[h_e[out]], weight[out]))
    path = reach_s[t_e] * weight * reach_t[h_e]
    if finite.any():
        scale = 0.5 / float(np.max(path[finite] / c_e[finite]))
    else:
        raise PRXAIError("barrier_max_flow: every edge is unbounded, so the maximum flow is infinite.")
    f = scale * path
    if not (f > 0).all() or not np.isfinite(f).all():
        raise PRXAIError("barrier_max_flow: capacities too far apart to start inside the feasible flows.")
    # internal nodes renumbered in order; source and sink drop out of the conservation constraints
    nodes = np.unique(np.concatenate([t_e, h_e]))
    nodes = nodes[(nodes != source) & (nodes != sink)]
    index = np.full(n_nodes, -1, dtype=np.int64)
    index[nodes] = np.arange(nodes.size)
    ti, hi = index[t_e], index[h_e]
    from_source = t_e == source
    c_fin = np.where(finite, c_e, 1.0)

    def residual(f: np.ndarray) -> np.ndarray:
        r = np.bincount(hi[hi >= 0], f[hi >= 0], minlength=nodes.size)
        return r - np.bincount(ti[ti >= 0], f[ti >= 0], minlength=nodes.size)

    def phi(f: np.ndarray, t: float) -> float:
        upper = np.log(c_e[finite] - f[finite]).sum()
        return -t * f[from_source].sum() - np.log(f).sum() - upper

    value = float(f[from_source].sum())
    t = 1.0 / value
    m = float(f.size)
    steps = 0
    while True:
        while True:
            steps += 1
            if steps > max_newton:
                raise PRXAIError(f"barrier_max_flow did not converge in {max_newton} Newton steps; raise max_newton "
                                 "or tol.")
            gap_up = np.where(finite, c_fin - f, np.inf)
            grad = -t * from_source - 1.0 / f + np.where(finite, 1.0 / gap_up, 0.0)
            hess = 1.0 / f**2 + np.where(finite, 1.0 / gap_up**2, 0.0)
            inv = 1.0 / hess
            # A f: inflow minus outflow per internal node; A^T w: w[head] - w[tail]
            r = residual(f)
            a_inv_g = np.bincount(hi[hi >= 0], (inv * grad)[hi >= 0], minlength=nodes.size) - np.bincount(
                ti[ti >= 0], (inv * grad)[ti >= 0], minlength=nodes.size)
            w = _solve_spd(ti, hi, inv, nodes.size, r - a_inv_g) if nodes.size else np.zeros(0)
            if on_newton_step is not None:
                on_newton_step()
            at_w = np.where(hi >= 0, w[np.maximum(hi, 0)] if nodes.size else 0.0, 0.0) - np.where(
                ti >= 0, w[np.maximum(ti, 0)] if nodes.size else 0.0, 0.0)
            step = -inv * (grad + at_w)
            decrement = float(-(grad @ step))
            shrink = step < 0
            grow = finite & (step > 0)
            s_max = min(np.min(f[shrink] / -step[shrink], initial=np.inf),
                        np.min((c_fin - f)[grow] / step[grow], initial=np.inf))
            s = min(1.0, 0.99 * s_max)
            current = phi(f, t)
            while s > 1e-14 and phi(f + s * step, t) > current - 0.25 * s * decrement:
                s *= 0.5
            f = f + s * step
            if decrement < 1e-6 or s <= 1e-14:
                break
        value = float(f[from_source].sum())
        if m / t <= tol * value or value <= 0:
            break
        t *= 10.0
    flow[live] = f
    return flow, value


def layered_barrier_flow(
    transitions: list[Tensor],
    mask: Tensor,
    sink_position: Tensor,
    sink: str = "all",
    tol: float = 1e-7,
    max_newton: int = 500,
    on_newton_step: Optional[Callable[[], None]] = None,
) -> Tensor:
    """Generalized attention flow: the barrier maximum flow from the input tokens up the layered graph.

    A super source feeds every real input token ``(0, j)`` (unbounded edges);
    the flow climbs the layers along ``(l, j) -> (l + 1, i)`` with capacity
    ``M_l[i, j]`` (what token ``i`` reads from ``j`` at layer ``l``) and drains
    from the last layer into a super sink, from every real token
    (``sink="all"``) or from the explained token only (``sink="target"``).
    The score of input token ``j`` is the flow on its source edge in the
    barrier solution (:func:`barrier_max_flow`); the scores sum to the maximum
    flow value.

    Args:
        transitions: Per layer, first layer first, ``(B, T, T)`` non-negative capacities.
        mask: ``(B, T)`` real-token mask; padding takes no part in the graph.
        sink_position: ``(B,)`` index of the explained token (used by ``sink="target"``).
        sink: ``"all"`` or ``"target"``.
        tol: Relative duality gap of the barrier method.
        max_newton: Newton steps allowed per example.
        on_newton_step: Called once per Newton step (see :func:`barrier_max_flow`).

    Returns:
        ``(B, T)`` flows, zero on padding.

    Raises:
        PRXAIError: Negative or non-finite capacities, no layers, a bad
            ``sink``, or an explained token that is padding.

    References:
        B. Azarkhalili, M. Libbrecht. *Generalized Attention Flow: Feature
        Attribution for Transformer Models via Maximum Flow.* ACL 2025.
    """
    if sink not in ("all", "target"):
        raise PRXAIError(f'sink must be "all" (every output token) or "target" (the explained token), got {sink!r}.')
    stacked = _stacked_capacities(transitions, "generalized attention flow")  # (B, L, T, T)
    batch, n_layers, length, _ = stacked.shape
    out = torch.zeros(batch, length, dtype=torch.float64)
    for b, real, caps in _real_tokens(stacked, mask):
        n = int(real.numel())
        at = torch.nonzero(real == int(sink_position[b])).flatten()
        if at.numel() == 0:
            raise PRXAIError(f"explained position {int(sink_position[b])} of example {b} is padding.")
        caps = caps.numpy()  # (L, n, n): row i reads column j
        layer, row, col = np.nonzero(caps)
        # node (l, j) = l * n + j; flow runs (l, j) -> (l + 1, i) with capacity M_l[i, j]
        tails = [layer * n + col]
        heads = [(layer + 1) * n + row]
        capacity = [caps[layer, row, col]]
        source, sink_node = (n_layers + 1) * n, (n_layers + 1) * n + 1
        tails.append(np.full(n, source))
        heads.append(np.arange(n))
        capacity.append(np.full(n, np.inf))
        outputs = np.arange(n) if sink == "all" else np.asarray([int(at[0])])
        tails.append(n_layers * n + outputs)
        heads.append(np.full(outputs.size, sink_node))
        capacity.append(np.full(outputs.size, np.inf))
        flow, _ = barrier_max_flow(np.concatenate(tails), np.concatenate(heads), np.concatenate(capacity),
                                   (n_layers + 1) * n + 2, source, sink_node, tol=tol, max_newton=max_newton,
                                   on_newton_step=on_newton_step)
        start = layer.size
        out[b, real] = torch.from_numpy(flow[start : start + n].copy())
    return out.to(transitions[0].dtype if transitions[0].is_floating_point() else torch.float32)


def _stacked_capacities(transitions: Sequence[Tensor], what: str) -> Tensor:
    """The ``L`` per-layer ``(B, T, T)`` capacities as one fp64 CPU tensor ``(B, L, T, T)``, checked: at least one
    layer, every capacity finite and non-negative."""
    if not transitions:
        raise PRXAIError(f"{what} needs at least one layer of transitions.")
    stacked = torch.stack([t.detach() for t in transitions], dim=1).to("cpu", torch.float64)
    low, high = value_range(stacked) if stacked.numel() else (0.0, 0.0)
    if not (math.isfinite(low) and math.isfinite(high)) or low < 0:
        raise PRXAIError(f"{what} capacities must be finite and non-negative.")
    return stacked


def _real_tokens(stacked: Tensor, mask: Tensor):
    """Per example with a real token: ``(b, real positions (n,), capacities among them (L, n, n))``."""
    valid = mask.detach().to("cpu").bool()
    for b in range(stacked.shape[0]):
        real = torch.nonzero(valid[b]).flatten()
        if real.numel():
            yield b, real, stacked[b][:, real][:, :, real]
