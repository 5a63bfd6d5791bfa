"""Search for one PR-XAI default that holds on every domain: tune halves to choose, held-out halves to confirm.

Each candidate is a :class:`~captum_prxai.PageRankAttribution` construction,
registered as a benchmark method ``ds:<name>`` with every setting passed
explicitly (so a name keeps its meaning when the library's defaults change)
and scored by :func:`captum_prxai.bench.run_benchmark` with the project's
ERASER metrics (comprehensiveness and sufficiency at bins 1/5/10/20/50%).
Examples come from the ``tune`` half of each test split
(:func:`captum_prxai.bench.ablation.dataset_half`); the ``holdout`` half is
used only to confirm the chosen construction.

The selection rule (``--summary``): for every candidate, cell and metric, the
paired loss to the best *other* method of the cell (the best mean among all
other methods but the random control; positive = the candidate is worse),
from the per-example differences on the same examples. A candidate's score
is its **worst case**: the largest of these losses over all cells and both
metrics. The candidate with the smallest worst case is chosen; it is then
compared with PR-G, PR-AG and GAE on the held-out halves.

Candidate edge weights beyond the built-in names (``A`` attention and ``dA``
its gradient, per head, ``(B, H, T, T)``; row ``i`` attends to column ``j``):

* ``softmax_gradient``: ``(A ⊙ (dA − Σ_k A_ik dA_ik))⁺``, the gradient with
  respect to the attention logits (pre-softmax scores), which drops the
  per-row constant of ``dA`` that the softmax cannot pass on.
* ``pow<γ>``: ``A^γ ⊙ dA⁺``, between PR-G (γ = 0) and PR-AG (γ = 1).

Also tried: damping 0.85 and 0.5 (against the library's 0.7), ``normalize_layers``,
signed scores (``signed=True``: the sign of gradient x input) and a product
fusion ``PageRank score x |gradient x input|`` (``*absixg``).

Run (one cell at a time, resumable from ``<out>/cache.jsonl``)::

    python benchmarks/default_search.py --cell minilm--movie-sentences --half tune --threads 1
    python benchmarks/default_search.py --cell minilm--bbc-news --half holdout --methods confirm --threads 1
    python benchmarks/default_search.py --summary
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' own modules
from research_methods import register_research_methods  # noqa: E402

register_research_methods()  # the research variants the tables name (idempotent)
from torch import Tensor

RESULTS = Path(__file__).resolve().parent / "results" / "default-search"
#: deletion-curve steps of the runs (AOPC in the per-cell tables is therefore coarse; it is not used)
STEPS = 1
METRICS = (("comprehensiveness", True), ("sufficiency", False))  # (name, higher is better)


# ----------------------------------------------------------------------------- candidate edge weights
def softmax_gradient(attention: Tensor, grad: Optional[Tensor]) -> Tensor:
    r"""``(A ⊙ (dA − Σ_k A_ik dA_ik))⁺``: the positive part of the gradient w.r.t. the attention logits.

    With ``A = softmax(S)`` row-wise, ``∂f/∂S_ij = A_ij (∂f/∂A_ij − Σ_k A_ik ∂f/∂A_ik)``:
    the part of ``dA`` constant along a row (which the softmax cannot turn into a
    change of the output) is removed before weighting by ``A``.
    """
    assert grad is not None
    centred = grad - (attention * grad).sum(dim=-1, keepdim=True)
    return (attention * centred).clamp_(min=0)


class PowerGradient:
    r"""``A^γ ⊙ dA⁺``: PR-G at ``γ = 0``, PR-AG at ``γ = 1``."""

    def __init__(self, gamma: float) -> None:
        self.gamma = float(gamma)

    def __call__(self, attention: Tensor, grad: Optional[Tensor]) -> Tensor:
        assert grad is not None
        return attention.clamp(min=0).pow(self.gamma) * grad.clamp(min=0)

    def _signed(self, attention: Tensor, grad: Optional[Tensor]) -> Tensor:
        """``e_h = A_h^γ ⊙ dA_h`` per head, before any positive part (the head-combining subclasses' input)."""
        assert grad is not None
        return attention.clamp(min=0).pow(self.gamma) * grad

    def __repr__(self) -> str:
        return f"PowerGradient({self.gamma:g})"


class NegativePowerGradient(PowerGradient):
    r"""``A^γ ⊙ (−dA)⁺``: the edges whose attention, if raised, would lower the target (the negative walk)."""

    def __call__(self, attention: Tensor, grad: Optional[Tensor]) -> Tensor:
        assert grad is not None
        return super().__call__(attention, -grad)

    def __repr__(self) -> str:
        return f"NegativePowerGradient({self.gamma:g})"


class NetPowerGradient(PowerGradient):
    r"""``(mean_h A_h^γ ⊙ dA_h)⁺``: each layer's heads averaged signed, then the positive part, so one head's push for
    an edge cancels another's push against it (``PowerGradient`` takes each head's positive part first, as
    gradient-weighted rollout does). Returns the layer's ``(B, T, T)`` map; the negative walk gets
    ``(mean_h A_h^γ ⊙ (−dA_h))⁺``, the net push against."""

    def __call__(self, attention: Tensor, grad: Optional[Tensor]) -> Tensor:
        return self._signed(attention, grad).mean(dim=1).clamp(min=0)

    def __repr__(self) -> str:
        return f"NetPowerGradient({self.gamma:g})"


class PartNetPowerGradient(PowerGradient):
    r"""``(mean_h (A_h^γ ⊙ dA_h)⁺ − ρ · mean_h (A_h^γ ⊙ dA_h)⁻)⁺``: each head's push against an edge cancels ``ρ``
    of the other heads' push for it. ``ρ = 0`` is :class:`PowerGradient` with the mean over heads (the default's
    edges), ``ρ = 1`` :class:`NetPowerGradient`. Returns the layer's ``(B, T, T)`` map; the negative walk gets the
    same with ``dA`` negated."""

    def __init__(self, gamma: float, rho: float) -> None:
        super().__init__(gamma)
        self.rho = float(rho)

    def __call__(self, attention: Tensor, grad: Optional[Tensor]) -> Tensor:
        edges = self._signed(attention, grad)
        return (edges.clamp(min=0).mean(dim=1) - self.rho * (-edges).clamp(min=0).mean(dim=1)).clamp(min=0)

    def __repr__(self) -> str:
        return f"PartNetPowerGradient({self.gamma:g}, {self.rho:g})"


class NetMaskedPowerGradient(PowerGradient):
    r"""``mean_h (A_h^γ ⊙ dA_h)⁺`` on the edges whose heads push for them on the net (``mean_h A_h^γ ⊙ dA_h > 0``),
    0 elsewhere: the default's edge weights, with :class:`NetPowerGradient`'s choice of edges (an edge the heads
    push against on the net is left out, the others keep their whole positive mass). Returns the layer's
    ``(B, T, T)`` map; the negative walk gets the same with ``dA`` negated."""

    def __call__(self, attention: Tensor, grad: Optional[Tensor]) -> Tensor:
        edges = self._signed(attention, grad)
        return edges.clamp(min=0).mean(dim=1) * (edges.mean(dim=1) > 0)

    def __repr__(self) -> str:
        return f"NetMaskedPowerGradient({self.gamma:g})"


class AgreementPowerGradient(PowerGradient):
    r"""``mean_h (A_h^γ ⊙ dA_h)⁺ · (1 + c) / 2`` with ``c = mean_h e_h / mean_h |e_h|`` the heads' agreement on the
    edge (``e_h = A_h^γ ⊙ dA_h``; 1 when every head pushes for it, −1 when every head pushes against): the default's
    edge scaled down where heads disagree, dropped only where none pushes for it (unlike
    :class:`NetPowerGradient` and :class:`NetMaskedPowerGradient`, which drop every edge pushed against on the net).
    Returns the layer's ``(B, T, T)`` map; the negative walk gets the same with ``dA`` negated."""

    def __call__(self, attention: Tensor, grad: Optional[Tensor]) -> Tensor:
        edges = self._signed(attention, grad)
        agreement = edges.mean(dim=1) / edges.abs().mean(dim=1).clamp_min(1e-30)
        return edges.clamp(min=0).mean(dim=1) * (1 + agreement) / 2

    def __repr__(self) -> str:
        return f"AgreementPowerGradient({self.gamma:g})"


def _gradient_norm_weighted(spec: Any) -> Callable[[Tensor, Tensor, bool], Tensor]:
    r"""Layer weights from gradient norms: each layer's term scaled to unit mass, then by its map's Frobenius norm.

    The token graph sums the layers' terms. Unweighted, a layer counts by the L1 mass of its edges;
    with ``normalize_layers`` every layer counts the same. Here layer ``l`` counts by ``‖E_l‖_F``,
    which favours layers whose gradient is concentrated on a few edges. Returns the per-layer term
    ``(edge_map, mask, causal) -> (B, T, T)`` of :func:`captum_prxai.capture_graph` (the capture keeps
    the running sum), so it is one pass (:func:`_one_pass`).
    """
    from captum_prxai.graph.build import token_layer

    spec = spec.replace(normalize_layers=True)

    def term(edge_map: Tensor, mask: Tensor, causal: bool) -> Tensor:
        norm = edge_map.flatten(1).norm(dim=1).reshape(-1, 1, 1)
        return token_layer(spec, edge_map, mask, causal) * norm

    return term


def _one_pass(attr: Any, ids: Tensor, mask: Tensor, target: Tensor, layer_term: Optional[Callable] = None,
              input_gradient: bool = False) -> Tuple[Any, Tensor]:
    """``(built graph, scores)`` of one pass of the token-graph attribution ``attr`` on ``ids`` (``mask`` its
    padding mask, passed to the model too; ``target`` one class per example), as its ``attribute_graph`` computes
    them, through the library's public pipeline (:func:`captum_prxai.capture_graph`, then
    :func:`~captum_prxai.build_graph` and :func:`~captum_prxai.score_graph` with ``attr.spec``), where a candidate
    sets what the attribution does not: the per-layer term of the layers' sum (default: the library's
    :func:`~captum_prxai.graph.build.token_layer`) and, with ``input_gradient``, the first attention layer's gradient
    x input from the same backward pass (``built.input_gradient``; gradient edges only)."""
    from captum_prxai import build_graph, capture_graph, score_graph
    from captum_prxai.graph.build import token_layer

    spec = attr.spec
    if layer_term is None:
        def layer_term(edge_map: Tensor, real: Tensor, causal: bool) -> Tensor:
            return token_layer(spec, edge_map, real, causal)

    captured = capture_graph(attr.forward_func, attr.layers, ids, mask.bool(), lambda layer, a, g: spec.edge_map(a, g),
                             targets=torch.as_tensor(target, device=ids.device).long().expand(ids.shape[0]),
                             additional_forward_args=(mask,), with_gradients=spec.needs_gradients,
                             input_gradient=spec.needs_input_gradient or input_gradient,
                             attention_fn=attr.attention_fn, capture=attr.capture,
                             target_position=attr.target_position, layer_term=layer_term, objective=spec.objective,
                             propagation=spec.propagation)
    built = build_graph(spec, captured)
    scores = score_graph(spec, built)
    return built, scores * mask.to(scores.dtype)


def _leaky_walk(adjacency: Tensor, teleport: Tensor, mask: Tensor, damping: float, beta: float,
                tol: float = 1e-10, max_iter: int = 1000) -> Tensor:
    r"""``x = (1 − α) p + α x D_s⁻¹ A`` with ``s_i = d_i^(1−β) (max_k d_k)^β`` (see :data:`LEAK`).

    ``(B, T)`` scores summing to one over the real tokens; a row with no out-weight leaks all its mass.
    """
    valid = mask.to(adjacency.dtype)
    a = adjacency * valid.unsqueeze(-1) * valid.unsqueeze(-2)
    d = a.sum(-1)
    top = d.amax(-1, keepdim=True)
    s = d.clamp_min(1e-30).pow(1 - beta) * top.pow(beta)
    p = teleport * valid
    p = p / p.sum(-1, keepdim=True)
    x = p.clone()
    for _ in range(max_iter):
        new = (1 - damping) * p + damping * torch.bmm((x / s).unsqueeze(1), a).squeeze(1)
        if float((new - x).abs().sum(-1).max()) < tol:
            x = new
            break
        x = new
    return x / x.sum(-1, keepdim=True)


def _path_scores(attr: Any, embeddings: Any, ids: Tensor, mask: Tensor, special: Tensor, target: Any, steps: int,
                 pad_token_id: int) -> Tensor:
    """Scores of :data:`PATH`: the attribution's token graphs averaged over ``steps`` passes with the word
    embeddings moved to ``b + α (e − b)`` (``α`` at the midpoints, ``b`` the [PAD] reference's), then scored once by
    the core's :func:`~captum_prxai.graph.scoring.score_graph` (the teleport and mask are the input's)."""
    from dataclasses import replace

    from captum_prxai.graph.scoring import score_graph
    from captum_prxai.methods.builtin import reference_ids

    with torch.no_grad():
        reference = embeddings(reference_ids(ids, special, mask, pad_token_id))
    alpha = [1.0]

    def along_the_path(module: Any, args: Any, output: Tensor) -> Tensor:
        return reference + alpha[0] * (output - reference)

    handle = embeddings.register_forward_hook(along_the_path)
    built = []
    try:
        for k in range(steps):
            alpha[0] = (k + 0.5) / steps
            built.append(attr.attribute_graph(ids, target=target, additional_forward_args=(mask,)).built)
    finally:
        handle.remove()
    positive = sum(b.adjacency for b in built) / steps
    negative = None if built[0].negative is None else sum(b.negative for b in built) / steps
    return score_graph(attr.spec, replace(built[-1], adjacency=positive, negative=negative))


def _rms_norm_held(module: Any, args: Any, output: Tensor) -> Tensor:
    """Forward hook on an RMSNorm module: ``weight · x / rms(x)`` with ``rms`` held constant in the backward pass:
    torch's ``rms_norm`` under the library's :func:`~captum_prxai.conservative.conservative_propagation`, which runs
    its own held norm in its place (statistics in fp32, as Llama's RMSNorm takes them) wherever gradients are taken,
    as they are in the capture's pass."""
    import torch.nn.functional as F

    from captum_prxai.conservative import conservative_propagation

    x = args[0]
    eps = getattr(module, "variance_epsilon", getattr(module, "eps", 1e-6))
    with conservative_propagation():
        return F.rms_norm(x, (x.shape[-1],), getattr(module, "weight", None), eps)


@contextlib.contextmanager
def _rms_norms_held(model: Any) -> Iterator[None]:
    """Inside the block every module of ``model`` whose class name ends in ``RMSNorm`` holds its scale constant
    (:data:`HELD_RMS_NORMS`); a model without one (an encoder, whose ``nn.LayerNorm`` the library holds) is run as
    it is."""
    handles = [m.register_forward_hook(_rms_norm_held) for m in model.modules()
               if type(m).__name__.endswith("RMSNorm")]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _relative_scores(attr: Any, ids: Tensor, mask: Tensor, target: Any, beta: float) -> Tensor:
    """Scores of :data:`RELATIVE`: each walk's personalised PageRank ``x`` over ``g^β``, ``g`` the same graph's global
    PageRank (the library's scoring steps with the hubs' power ``−β``, which :class:`GraphSpec` does not accept),
    combined as the library combines the walks (``r⁺ − λ r⁻``, the gate deciding on the PageRank vectors)."""
    from captum_prxai.graph.scoring import walk_weights

    spec = attr.spec
    built = attr.attribute_graph(ids, target=target, additional_forward_args=(mask,)).built
    ranks, walks = _relative_walks(spec, built, beta)
    if len(walks) == 1:
        return walks[0]
    return walks[0] - walk_weights(spec, built, *ranks).to(walks[0].dtype)[:, None] * walks[1]


def _relative_walks(spec: Any, built: Any, beta: float) -> Tuple[List[Tensor], List[Tensor]]:
    """Each walk's personalised PageRank ``x`` (the library's :func:`~captum_prxai.graph.scoring.walk_ranks`) and
    ``x / g^β`` renormalised over the real tokens, ``g`` the same graph's global PageRank: the library's hubs' weight
    (:func:`~captum_prxai.graph.scoring.hub_weighted`) at the power ``−β``. ``([x⁺(, x⁻)], [r⁺(, r⁻)])``."""
    from captum_prxai.graph.scoring import global_ranks, hub_weighted, walk_ranks

    ranks = walk_ranks(spec, built)
    return ranks, [hub_weighted(x, g, -beta, built.mask) for x, g in zip(ranks, global_ranks(spec, built))]


def walk_correlation(positive: Tensor, negative: Tensor, ordinary: Tensor) -> float:
    """Pearson correlation of the two walks' scores ``P⁺`` and ``P⁻`` over one example's tokens where ``ordinary``
    is true (every real token but the explained one, whose teleport mass both walks share); 0 when either is
    constant: the core's :func:`captum_prxai.graph.scoring.walk_correlation`, the gate's signal, on one example."""
    from captum_prxai.graph.scoring import walk_correlation as batched

    return float(batched(positive.reshape(1, -1), negative.reshape(1, -1), ordinary.reshape(1, -1))[0])


def _edge(name: str) -> Any:
    if name == "softmax_gradient":
        return softmax_gradient
    if name.startswith("pow"):
        return PowerGradient(float(name[3:]))
    if name.startswith("netpow"):
        return NetPowerGradient(float(name[6:]))
    if name.startswith("partnet"):  # partnet<ρ>pow<γ>
        rho, gamma = name[7:].split("pow")
        return PartNetPowerGradient(float(gamma), float(rho))
    if name.startswith("netmask"):
        return NetMaskedPowerGradient(float(name[7:]))
    if name.startswith("agree"):
        return AgreementPowerGradient(float(name[5:]))
    return name  # a built-in edge weight


#: name -> PageRankAttribution settings (all explicit); edge weights named as in _edge
_BASE = {"graph": "token", "teleport": "target", "damping": 0.7, "normalize_layers": False, "signed": False,
         "walks": "positive"}  # pm: the negative walk is a second attribution (see SIGNED_WALKS)
CANDIDATES: Dict[str, Dict[str, Any]] = {
    "ds:g": {"edge_weight": "gradient"},
    "ds:ag": {"edge_weight": "attention_gradient"},
    "ds:sg": {"edge_weight": "softmax_gradient"},
    "ds:pow0.25": {"edge_weight": "pow0.25"},
    "ds:pow0.5": {"edge_weight": "pow0.5"},
    "ds:pow0.75": {"edge_weight": "pow0.75"},
    "ds:g:d0.85": {"edge_weight": "gradient", "damping": 0.85},
    "ds:ag:d0.85": {"edge_weight": "attention_gradient", "damping": 0.85},
    "ds:sg:d0.85": {"edge_weight": "softmax_gradient", "damping": 0.85},
    "ds:ag:d0.5": {"edge_weight": "attention_gradient", "damping": 0.5},
    "ds:sg:d0.5": {"edge_weight": "softmax_gradient", "damping": 0.5},
    "ds:pow0.5:d0.5": {"edge_weight": "pow0.5", "damping": 0.5},
    "ds:g:nl": {"edge_weight": "gradient", "normalize_layers": True},
    "ds:ag:nl": {"edge_weight": "attention_gradient", "normalize_layers": True},
    "ds:sg:nl": {"edge_weight": "softmax_gradient", "normalize_layers": True},
    # signed walks: the PageRank score takes the sign of the token's gradient x input (existing option)
    "ds:g:signed": {"edge_weight": "gradient", "signed": True},
    "ds:ag:signed": {"edge_weight": "attention_gradient", "signed": True},
    # product fusion with gradient x input (see FUSED): PageRank score x |g . x|
    "ds:g*absixg": {"edge_weight": "gradient"},
    "ds:ag*absixg": {"edge_weight": "attention_gradient"},
    # signed walks, walked separately: PageRank on A^0.5 ⊙ dA⁺ minus PageRank on A^0.5 ⊙ (−dA)⁺ (two passes)
    "ds:pow0.5:pm": {"edge_weight": "pow0.5"},
    # layer weights from gradient norms (see _gradient_norm_weighted)
    "ds:pow0.5:l2w": {"edge_weight": "pow0.5"},
    # fourth round: explain the log-probability of the class instead of its logit (see LOG_PROB)
    "ds:pow0.5:lp": {"edge_weight": "pow0.5"},
    "ds:pow0.5:lp:pm": {"edge_weight": "pow0.5"},
    # fourth round: the library's other graph options on PR-TAG's edges, and a weighted negative walk
    "ds:pow0.5:layered": {"edge_weight": "pow0.5", "graph": "layered"},
    "ds:pow0.5:max": {"edge_weight": "pow0.5", "head_reduction": "max"},
    "ds:pow0.5:nsl": {"edge_weight": "pow0.5", "self_loops": "drop"},
    "ds:pow0.5:pm0.5": {"edge_weight": "pow0.5"},
    "ds:pow0.5:pmw": {"edge_weight": "pow0.5"},
    "ds:pow0.5:pm0.25": {"edge_weight": "pow0.5"},
    "ds:pow0.5:pm0.75": {"edge_weight": "pow0.5"},
    # the positive walk's order among tokens it ranks above the negative walk; the others last (see DEMOTE)
    "ds:pow0.5:pmd": {"edge_weight": "pow0.5"},
    # fifth round: the default's two walks (λ = 0.25) at other dampings (the library's is 0.7)
    "ds:pow0.5:pm0.25:d0.5": {"edge_weight": "pow0.5", "damping": 0.5},
    "ds:pow0.5:pm0.25:d0.85": {"edge_weight": "pow0.5", "damping": 0.85},
    # sixth round: the default's two walks on a leaky walk (see LEAK): weak rows hand their mass back to the teleport
    "ds:pow0.5:pm0.25:leak": {"edge_weight": "pow0.5", "walks": "both", "negative_weight": 0.25},
    "ds:pow0.5:pm0.25:leak0.5": {"edge_weight": "pow0.5", "walks": "both", "negative_weight": 0.25},
    # sixth round: no edge returns to the explained token ([CLS] on an encoder: the library's sink="drop" drops the
    # edges into the first token), so the walk comes back to it by the teleport alone
    "ds:pow0.5:pm0.25:nosink": {"edge_weight": "pow0.5", "sink": "drop"},
    # seventh round: the default's two walks (λ = 0.25) on less tempered edges, γ = 0.25 and γ = 0 (PR-G's dA⁺)
    "ds:pow0.25:pm0.25": {"edge_weight": "pow0.25"},
    "ds:pow0:pm0.25": {"edge_weight": "pow0"},
    # seventh round, decoders: their default's two walks (λ = 1) on edges tempered less, γ = 0.25
    "ds:pow0.25:pm": {"edge_weight": "pow0.25"},
    # eighth round (MPNet BBC News tune half): the 12-layer rule's two walks times |gradient x input| (see FUSED)
    "ds:pow0.25:pm0.25*absixg": {"edge_weight": "pow0.25"},
    # ninth round: the 12-layer rule's two walks, or its positive walk alone where the walks agree (see GATE)
    "ds:pow0.25:pm0.25:gate0.5": {"edge_weight": "pow0.25"},
    # tenth round: the same gate on the 6-layer encoder's default (γ = 0.5)
    "ds:pow0.5:pm0.25:gate0.5": {"edge_weight": "pow0.5"},
    # eleventh round: relative PageRank (see RELATIVE): each walk's score over the same graph's global PageRank
    "ds:pow0.25:rel": {"edge_weight": "pow0.25"},
    "ds:pow0.25:rel0.5": {"edge_weight": "pow0.25"},
    "ds:pow0.25:rel-0.5": {"edge_weight": "pow0.25"},
    "ds:pow0.25:pm0.25:gate0.5:rel-0.5": {"edge_weight": "pow0.25"},
    "ds:pow0.25:pm0.25:gate0.5:rel-1": {"edge_weight": "pow0.25"},
    "ds:pow0.5:pm0.25:rel-0.5": {"edge_weight": "pow0.5"},
    "ds:pow0.5:pm0.25:rel-1": {"edge_weight": "pow0.5"},
    # the decoders' default (PR-TAG±, λ = 1) with hubs raised: a first look on the one cached decoder tune half
    "ds:pow0.5:pm:rel-0.5": {"edge_weight": "pow0.5"},
    "ds:pow0.5:pm:rel-1": {"edge_weight": "pow0.5"},
    "ds:pow0.25:pm0.25:gate0.5:rel0.5": {"edge_weight": "pow0.25"},
    "ds:pow0.5:pm0.25:rel0.5": {"edge_weight": "pow0.5"},
    # eleventh round: the 12-layer default (γ = 0.25, λ = 0.25, gate 0.5) at damping 0.85 (the sixth round's lead)
    "ds:pow0.25:pm0.25:gate0.5:d0.85": {"edge_weight": "pow0.25", "damping": 0.85},
    # twelfth round (the 12-layer encoder's long tune halves): the default (hubs 0.5) with one graph option changed
    # (see LAYER_SHARE for the layer subsets), hubs 2, the global PageRank alone (uniform teleport, no hubs), and the
    # class's log-probability explained instead of its logit (LOG_PROB: the contrastive gradient, on 5 topics too)
    "ds:pow0.25:pm0.25:gate0.5:rel-0.5:late0.5": {"edge_weight": "pow0.25"},
    "ds:pow0.25:pm0.25:gate0.5:rel-0.5:late0.25": {"edge_weight": "pow0.25"},
    "ds:pow0.25:pm0.25:gate0.5:rel-0.5:early0.5": {"edge_weight": "pow0.25"},
    "ds:pow0.25:pm0.25:gate0.5:rel-0.5:nl": {"edge_weight": "pow0.25", "normalize_layers": True},
    "ds:pow0.25:pm0.25:gate0.5:rel-0.5:d0.5": {"edge_weight": "pow0.25", "damping": 0.5},
    "ds:pow0.25:pm0.25:gate0.5:rel-0.5:max": {"edge_weight": "pow0.25", "head_reduction": "max"},
    "ds:pow0.25:pm0.25:gate0.5:max:rel-1": {"edge_weight": "pow0.25", "head_reduction": "max"},
    "ds:pow0.25:pm0.25:gate0.5:rel-2": {"edge_weight": "pow0.25"},
    "ds:pow0.25:pm0.25:gate0.5:uniform": {"edge_weight": "pow0.25", "teleport": "uniform"},
    "ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp": {"edge_weight": "pow0.25"},  # see LOG_PROB
    # ... and a first look at the same on the 6-layer default (the MiniLM BBC News tune half, five classes; tweets)
    "ds:pow0.5:pm0.25:rel-0.5:lp": {"edge_weight": "pow0.5"},
    # fifteenth round: the 12-layer default plus a share of the same pass's gradient x input at the first layer (see
    # ADDED_IXG; MPNet's tweets and reviews tune halves)
    "ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp:+ixg0.05": {"edge_weight": "pow0.25"},
    "ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp:+ixg0.25": {"edge_weight": "pow0.25"},
    "ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp:+ixg1": {"edge_weight": "pow0.25"},
    # ... and the same with each layer's heads averaged signed before the positive part (see NetPowerGradient), and
    # the 6-layer default (γ = 0.5, λ = 0.25, hubs 0.5, log-prob.) so changed (every encoder tune half on the machine)
    "ds:netpow0.25:pm0.25:gate0.5:rel-0.5:lp": {"edge_weight": "netpow0.25"},
    "ds:netpow0.5:pm0.25:rel-0.5:lp": {"edge_weight": "netpow0.5"},
    # sixteenth round: between the two, each default with a share ρ of the heads' push against an edge cancelling the
    # push for it (PartNetPowerGradient, ρ = 0.5 on every encoder tune half; ρ = 0.25 on the BBC News and MPNet
    # reviews halves), and with the edges the heads push against on the net left out (NetMaskedPowerGradient)
    "ds:partnet0.5:pm0.25:gate0.5:rel-0.5:lp": {"edge_weight": "partnet0.5pow0.25"},
    "ds:partnet0.25:pm0.25:gate0.5:rel-0.5:lp": {"edge_weight": "partnet0.25pow0.25"},
    "ds:netmask0.25:pm0.25:gate0.5:rel-0.5:lp": {"edge_weight": "netmask0.25"},
    "ds:partnet0.5:pm0.25:rel-0.5:lp": {"edge_weight": "partnet0.5pow0.5"},
    "ds:partnet0.25:pm0.25:rel-0.5:lp": {"edge_weight": "partnet0.25pow0.5"},
    "ds:netmask0.5:pm0.25:rel-0.5:lp": {"edge_weight": "netmask0.5"},
    # ... and with each edge scaled by the heads' agreement on it (AgreementPowerGradient: shrunk, never dropped while
    # a head pushes for it)
    "ds:agree0.25:pm0.25:gate0.5:rel-0.5:lp": {"edge_weight": "agree0.25"},
    "ds:agree0.5:pm0.25:rel-0.5:lp": {"edge_weight": "agree0.5"},
    # ... and each default's edges averaged along the path of Integrated Gradients (see PATH; 8 passes)
    "ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp:path8": {"edge_weight": "pow0.25"},
    "ds:pow0.5:pm0.25:rel-0.5:lp:path8": {"edge_weight": "pow0.5"},
    # ... and the decoders' default (PR-TAG±, log-prob.) with the hubs' weight (hubs 0.5), on every decoder tune half
    "ds:pow0.5:lp:pm:rel-0.5": {"edge_weight": "pow0.5"},
    # seventeenth round: each encoder default from a pass under conservative propagation (see CONSERVATIVE), and the
    # same walk's scores times 1 + R / max|R|, R that pass's own gradient x input (CP-LRP's relevance; CP_FUSED)
    "ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp:cp": {"edge_weight": "pow0.25"},
    "ds:pow0.5:pm0.25:rel-0.5:lp:cp": {"edge_weight": "pow0.5"},
    "ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp:cp*cpixg": {"edge_weight": "pow0.25"},
    "ds:pow0.5:pm0.25:rel-0.5:lp:cp*cpixg": {"edge_weight": "pow0.5"},
    # ... and a first look on the decoders: their default (PR-TAG±, λ = 1, log-prob.) from the conservative pass (the
    # library holds the softmax; SmolLM2's RMSNorm is written out by hand, so its scale is not held), times that
    # pass's gradient x input, and the same with the RMSNorm scales held by the benchmark's hooks (HELD_RMS_NORMS)
    "ds:pow0.5:lp:pm:cp": {"edge_weight": "pow0.5", "walks": "both", "negative_weight": 1.0},
    "ds:pow0.5:lp:pm:cp*cpixg": {"edge_weight": "pow0.5", "walks": "both", "negative_weight": 1.0},
    "ds:pow0.5:lp:pm:cpnorm*cpixg": {"edge_weight": "pow0.5", "walks": "both", "negative_weight": 1.0},
}
#: the twelfth round's candidates: the 12-layer default's gated walks with one option changed
TWELFTH_NEW = ["ds:pow0.25:pm0.25:gate0.5:" + change for change in (
    "rel-0.5:late0.5", "rel-0.5:late0.25", "rel-0.5:early0.5", "rel-0.5:nl", "rel-0.5:d0.5", "rel-0.5:max",
    "max:rel-1", "rel-2", "uniform", "rel-0.5:lp")]
#: the fifteenth round's candidates: the 12-layer default (γ = 0.25, λ = 0.25, gate 0.5, hubs 0.5, log-prob.) plus κ
#: times the same pass's gradient x input at the first layer (see ADDED_IXG), and with its heads averaged signed
FIFTEENTH_IXG = ["ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp:+ixg" + kappa for kappa in ("0.05", "0.25", "1")]
FIFTEENTH_NEW = FIFTEENTH_IXG + ["ds:netpow0.25:pm0.25:gate0.5:rel-0.5:lp"]
#: the 6-layer default with its heads averaged signed (MiniLM-L6's halves; no gate there)
FIFTEENTH_MINILM = ["ds:netpow0.5:pm0.25:rel-0.5:lp"]
#: the sixteenth round's candidates: the 12-layer default with its heads' pushes partly cancelled (ρ = 0.5, 0.25), with
#: the edges its heads push against on the net left out, with its graphs averaged along the IG path (PATH), and with
#: each edge scaled by its heads' agreement; the same on the 6-layer default
SIXTEENTH_NEW = ["ds:partnet0.5:pm0.25:gate0.5:rel-0.5:lp", "ds:netmask0.25:pm0.25:gate0.5:rel-0.5:lp",
                 "ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp:path8", "ds:partnet0.25:pm0.25:gate0.5:rel-0.5:lp",
                 "ds:agree0.25:pm0.25:gate0.5:rel-0.5:lp"]
SIXTEENTH_MINILM = ["ds:partnet0.5:pm0.25:rel-0.5:lp", "ds:netmask0.5:pm0.25:rel-0.5:lp",
                    "ds:pow0.5:pm0.25:rel-0.5:lp:path8", "ds:partnet0.25:pm0.25:rel-0.5:lp",
                    "ds:agree0.5:pm0.25:rel-0.5:lp"]
#: the seventeenth round's candidates: each encoder default from one pass under conservative propagation
#: (CONSERVATIVE), alone and times the same pass's gradient x input
SEVENTEENTH_NEW = ["ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp:cp", "ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp:cp*cpixg"]
SEVENTEENTH_MINILM = ["ds:pow0.5:pm0.25:rel-0.5:lp:cp", "ds:pow0.5:pm0.25:rel-0.5:lp:cp*cpixg"]
#: ... and on the decoders: their default against the same from the conservative pass, times its gradient x input, and
#: with the RMSNorm scales held too
SEVENTEENTH_DECODERS = ["ds:pow0.5:lp:pm", "ds:pow0.5:lp:pm:cp", "ds:pow0.5:lp:pm:cp*cpixg",
                        "ds:pow0.5:lp:pm:cpnorm*cpixg"]
#: the decoders' default on the class's log-probability (fourteenth round) with the hubs' weight, which the eleventh
#: round measured on one decoder tune half, on the logit
SIXTEENTH_DECODERS = ["ds:pow0.5:lp:pm", "ds:pow0.5:lp:pm:rel-0.5"]
#: a walk on part of the attention layers: name -> (which end, share of the layers), e.g. ("late", 0.5) the last half
LAYER_SHARE: Dict[str, Tuple[str, float]] = {"ds:pow0.25:pm0.25:gate0.5:rel-0.5:late0.5": ("late", 0.5),
                                             "ds:pow0.25:pm0.25:gate0.5:rel-0.5:late0.25": ("late", 0.25),
                                             "ds:pow0.25:pm0.25:gate0.5:rel-0.5:early0.5": ("early", 0.5)}
#: candidates with a negative walk subtracted (see SIGNED_WALKS) and with gradient-norm layer weights
SIGNED_WALKS = {"ds:pow0.5:pm", "ds:pow0.5:lp:pm", "ds:pow0.5:pm0.5", "ds:pow0.5:pmw", "ds:pow0.5:pmd",
                "ds:pow0.5:pm0.25", "ds:pow0.5:pm0.75", "ds:pow0.5:pm0.25:d0.5", "ds:pow0.5:pm0.25:d0.85",
                "ds:pow0.5:pm0.25:nosink", "ds:pow0.25:pm0.25", "ds:pow0:pm0.25", "ds:pow0.25:pm",
                "ds:pow0.25:pm0.25*absixg", "ds:pow0.25:pm0.25:gate0.5", "ds:pow0.5:pm0.25:gate0.5",
                "ds:pow0.25:pm0.25:gate0.5:rel0.5", "ds:pow0.5:pm0.25:rel0.5", "ds:pow0.25:pm0.25:gate0.5:d0.85",
                "ds:pow0.25:pm0.25:gate0.5:rel-0.5", "ds:pow0.25:pm0.25:gate0.5:rel-1", "ds:pow0.5:pm0.25:rel-0.5",
                "ds:pow0.5:pm0.25:rel-1", "ds:pow0.5:pm:rel-0.5", "ds:pow0.5:pm:rel-1", *TWELFTH_NEW,
                "ds:pow0.5:pm0.25:rel-0.5:lp", *FIFTEENTH_NEW, *FIFTEENTH_MINILM, *SIXTEENTH_NEW,
                *SIXTEENTH_MINILM, SIXTEENTH_DECODERS[1], *SEVENTEENTH_NEW, *SEVENTEENTH_MINILM}
#: two walks, demoting only: a token keeps its positive-walk score P⁺ when P⁺ ≥ P⁻ and gets P⁺ − P⁻ < 0
#: otherwise, so PR-TAG's order is kept among the net-positive tokens and the net-negative ones rank last
DEMOTE = {"ds:pow0.5:pmd"}
#: the weight of the negative walk's PageRank in the difference (default 1); "mass": per example, the
#: negative token graph's total edge mass over the positive one's (a weak negative graph counts little)
NEGATIVE_WEIGHT: Dict[str, Any] = {"ds:pow0.5:pm0.5": 0.5, "ds:pow0.5:pmw": "mass", "ds:pow0.5:pm0.25": 0.25,
                                   "ds:pow0.5:pm0.75": 0.75, "ds:pow0.5:pm0.25:d0.5": 0.25,
                                   "ds:pow0.5:pm0.25:d0.85": 0.25, "ds:pow0.5:pm0.25:nosink": 0.25,
                                   "ds:pow0.25:pm0.25": 0.25, "ds:pow0:pm0.25": 0.25,
                                   "ds:pow0.25:pm0.25*absixg": 0.25, "ds:pow0.25:pm0.25:gate0.5": 0.25,
                                   "ds:pow0.5:pm0.25:gate0.5": 0.25, "ds:pow0.25:pm0.25:gate0.5:rel0.5": 0.25,
                                   "ds:pow0.5:pm0.25:rel0.5": 0.25, "ds:pow0.25:pm0.25:gate0.5:d0.85": 0.25,
                                   "ds:pow0.25:pm0.25:gate0.5:rel-0.5": 0.25, "ds:pow0.25:pm0.25:gate0.5:rel-1": 0.25,
                                   "ds:pow0.5:pm0.25:rel-0.5": 0.25, "ds:pow0.5:pm0.25:rel-1": 0.25,
                                   "ds:pow0.5:pm:rel-0.5": 1.0, "ds:pow0.5:pm:rel-1": 1.0, SIXTEENTH_DECODERS[1]: 1.0,
                                   **{k: 0.25 for k in TWELFTH_NEW + FIFTEENTH_NEW + FIFTEENTH_MINILM + SIXTEENTH_NEW
                                         + SIXTEENTH_MINILM + SEVENTEENTH_NEW + SEVENTEENTH_MINILM},
                                   "ds:pow0.5:pm0.25:rel-0.5:lp": 0.25}
#: gated walks, per example: the positive walk alone when the two walks' scores correlate above the threshold over
#: the real tokens other than the explained one (:func:`walk_correlation`), else the two walks ``P⁺ − λ P⁻``; the
#: same single pass (run by the library's ``walk_gate``)
GATE: Dict[str, float] = {"ds:pow0.25:pm0.25:gate0.5": 0.5, "ds:pow0.5:pm0.25:gate0.5": 0.5,
                          "ds:pow0.25:pm0.25:gate0.5:rel0.5": 0.5, "ds:pow0.25:pm0.25:gate0.5:d0.85": 0.5,
                          "ds:pow0.25:pm0.25:gate0.5:rel-0.5": 0.5, "ds:pow0.25:pm0.25:gate0.5:rel-1": 0.5,
                          **{k: 0.5 for k in TWELFTH_NEW + FIFTEENTH_NEW + SIXTEENTH_NEW + SEVENTEENTH_NEW}}
#: relative PageRank: each walk's personalised PageRank ``x`` divided by ``g^β``, ``g`` the global PageRank of the same
#: graph (uniform teleport over the real tokens, same damping), so a token that every walk reaches (a hub of the
#: graph) ranks by how much more the explained token's walk reaches it than a walk from anywhere. β = 1 is the ratio
#: (the degree-normalised order of local graph partitioning, Andersen, Chung and Lang 2006, for a directed graph);
#: β = 0.5 a softened ratio; β = −0.5 the opposite, hubs raised. The same pass and graphs; one more PageRank solve
#: per walk. β ≤ 0 is the library's ``hub_power = −β`` and is scored by it; β > 0 by :func:`_relative_scores`.
RELATIVE: Dict[str, float] = {"ds:pow0.25:rel": 1.0, "ds:pow0.25:rel0.5": 0.5, "ds:pow0.25:rel-0.5": -0.5,
                              "ds:pow0.25:pm0.25:gate0.5:rel0.5": 0.5, "ds:pow0.5:pm0.25:rel0.5": 0.5,
                              "ds:pow0.25:pm0.25:gate0.5:rel-0.5": -0.5, "ds:pow0.25:pm0.25:gate0.5:rel-1": -1.0,
                              "ds:pow0.5:pm0.25:rel-0.5": -0.5, "ds:pow0.5:pm0.25:rel-1": -1.0,
                              "ds:pow0.5:pm:rel-0.5": -0.5, "ds:pow0.5:pm:rel-1": -1.0, SIXTEENTH_DECODERS[1]: -0.5,
                              **{k: float(k.split(":rel", 1)[1].split(":")[0]) for k in TWELFTH_NEW if ":rel" in k},
                              "ds:pow0.5:pm0.25:rel-0.5:lp": -0.5,
                              **{k: -0.5 for k in FIFTEENTH_NEW + FIFTEENTH_MINILM + SIXTEENTH_NEW + SIXTEENTH_MINILM
                                 + SEVENTEENTH_NEW + SEVENTEENTH_MINILM}}
NORM_WEIGHTED = {"ds:pow0.5:l2w"}
#: leaky walks: the same built graphs (``attribute_graph``), each walked with row ``i`` divided by
#: ``s_i = d_i^(1−β) · max_k d_k^β`` instead of its out-weight ``d_i`` (β = 1: one scale for the whole graph, so
#: a token whose out-edges are weak passes on only part of its mass and the rest returns to the teleport;
#: β = 0 is PageRank). A substochastic walk ``x = (1 − α) p + α x D_s⁻¹ A``, solved by iteration.
LEAK: Dict[str, float] = {"ds:pow0.5:pm0.25:leak": 1.0, "ds:pow0.5:pm0.25:leak0.5": 0.5}
#: candidates whose score is the PageRank score times |gradient x input| at the word embeddings
#: (Captum LayerGradientXActivation, summed over the hidden size; here a second backward pass,
#: in the core it would come from the same pass); with two walks, the product takes their difference
FUSED = {"ds:g*absixg", "ds:ag*absixg", "ds:pow0.25:pm0.25*absixg"}
#: candidates whose gradients are those of the explained class's log-probability, ``log softmax(z)_t =
#: z_t − logsumexp(z)``, instead of its logit ``z_t``: the metrics measure a drop in probability, and
#: for two classes ``∇ log p_t = (1 − p_t) ∇(z_t − z_other)``, the contrastive gradient, up to a
#: positive factor that PageRank's normalisation removes. Same single pass.
LOG_PROB = {"ds:pow0.5:lp", "ds:pow0.5:lp:pm", "ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp", "ds:pow0.5:pm0.25:rel-0.5:lp",
            *FIFTEENTH_NEW, *FIFTEENTH_MINILM, *SIXTEENTH_NEW, *SIXTEENTH_MINILM, SIXTEENTH_DECODERS[1],
            *SEVENTEENTH_NEW, *SEVENTEENTH_MINILM, *SEVENTEENTH_DECODERS[1:]}
#: additive fusion, one pass: the candidate's scores plus ``κ · s / Σ|s|``, ``s`` the same backward pass's gradient x
#: input at the first attention layer's input (signed, summed over the hidden size; the capture's ``input_gradient``),
#: scaled to unit L1 mass over the real tokens. The walk's scores sum to ``1 − λ`` and are nearly flat past their top
#: tokens on long inputs (twelfth round), so a small κ orders that flat middle by each token's own first-order
#: contribution and κ = 1 weighs the two alike; unlike the eighth round's product (``*absixg``) it keeps the sign
ADDED_IXG: Dict[str, float] = {name: float(name.rsplit(":+ixg", 1)[1]) for name in FIFTEENTH_IXG}
#: path-integrated edges, several passes: the candidate's token graphs (both walks') averaged over ``m`` passes at
#: inputs on the path of Integrated Gradients, the word embeddings ``b + α (e − b)`` at the midpoints
#: ``α = (k + ½) / m`` (``b``: the embeddings of the [PAD] reference the benchmark's LIG uses, special tokens kept),
#: then walked once. A confident prediction's gradient at the input is saturated (``∇ log p ≈ 0`` along most
#: directions); on the path it is not, which is LIG's advantage (Sundararajan et al. 2017). Here the attention and its
#: gradient are taken along the same path; cf. the attention-scaling path of Hao et al. (AAAI 2021), which scales
#: the attention maps instead. ``m`` passes, not one: a candidate for the goal's first part only.
PATH: Dict[str, int] = {name: int(name.rsplit(":path", 1)[1]) for name in CANDIDATES if ":path" in name}
#: conservative propagation, one pass: the candidate's pass with every attention softmax (its logits' queries and keys)
#: and every LayerNorm's scale held constant in the backward pass (their values unchanged in the forward pass), so no
#: gradient flows through a softmax's logits or a normaliser: the backward pass of CP-LRP (Ali et al., "XAI for
#: Transformers: Better Explanations through Conservative Propagation", ICML 2022), the rules AttnLRP (Achtibat et al.,
#: ICML 2024) refines for the softmax. The attention gradient ``dA`` (the graph's edges) and the gradient x input at the
#: first attention layer (the capture's ``input_gradient``) are then those of the network with its attention weights
#: and normalisers fixed. Run by the library's ``propagation="conservative"`` (:mod:`captum_prxai.conservative`); the
#: round's runs held the query/key projections and LayerNorms with forward hooks instead, which give the same scores
#: (0.0 on the MiniLM and MPNet examples checked; tests/test_conservative.py compares the two on both capture paths).
CONSERVATIVE = {name for name in CANDIDATES if ":cp" in name}
#: ... times ``1 + R / max|R|``, ``R`` that pass's gradient x input at the first attention layer (CP-LRP's relevance,
#: summed over the hidden size): a token the conservative pass credits is raised up to twice its walk score, one it
#: debits lowered towards 0; the walk's order stays where ``R`` is small (the library's ``relevance_weight=1``)
CP_FUSED = {name for name in CONSERVATIVE if name.endswith("*cpixg")}
#: ... with every RMSNorm module's scale held constant too, by forward hooks (:func:`_rms_norms_held`): decoders write
#: their RMSNorm out by hand, which the library's torch-function mode does not see
HELD_RMS_NORMS = {name for name in CONSERVATIVE if ":cpnorm" in name}
#: the conservative pass's gradient x input at the word embeddings alone, on the logit: CP-LRP's relevance, one pass
CP_LRP = "cp-lrp"
CANDIDATES = {k: {**_BASE, **v} for k, v in CANDIDATES.items()}

#: method lists: the tuning run (candidates + references) and the held-out confirmation
#: 'extra': the signed and fused candidates, clear losers on the first examples, run on the short cells only
EXTRA = ["ds:g:signed", "ds:ag:signed", "ds:g*absixg", "ds:ag*absixg"]
REFERENCES = ["gae", "random"]
#: 'later': the constructions added after the choice (signed walks, gradient-norm layer weights), run with --methods
LATER = ["ds:pow0.5:pm", "ds:pow0.5:l2w"]
#: 'fourth': the fourth round (log-probability gradients, the layered graph, max over heads, no self-loops,
#: weighted and demoting negative walks), with PR-TAG and PR-TAG± run alongside to check the pairing;
#: 'fourth-long': the subset run on the 256-token cells (the clear losers of the short cells left out)
FOURTH = ["ds:pow0.5", "ds:pow0.5:pm", "ds:pow0.5:lp", "ds:pow0.5:lp:pm", "ds:pow0.5:layered", "ds:pow0.5:max",
          "ds:pow0.5:nsl", "ds:pow0.5:pm0.5", "ds:pow0.5:pmw", "ds:pow0.5:pmd", "ds:pow0.5:pm0.25",
          "ds:pow0.5:pm0.75"]
#: 'fourth-holdout': the weighted two-way walks, for the held-out halves (with PR-TAG for the pairing check)
FOURTH_HOLDOUT = ["ds:pow0.5", "ds:pow0.5:pm0.25", "ds:pow0.5:pm0.5", "ds:pow0.5:pm0.75", "ds:pow0.5:pmw",
                  "ds:pow0.5:pmd"]
FOURTH_LONG = ["ds:pow0.5", "ds:pow0.5:pm", "ds:pow0.5:lp", "ds:pow0.5:max", "ds:pow0.5:pm0.5", "ds:pow0.5:pmw",
               "ds:pow0.5:pmd"]
#: 'fifth': the default (λ = 0.25, damping 0.7) against the same walks at dampings 0.5 and 0.85, with LIG-50
FIFTH = ["ds:pow0.5:pm0.25", "ds:pow0.5:pm0.25:d0.5", "ds:pow0.5:pm0.25:d0.85", "ig"]
#: 'sixth': the default against its two walks made leaky (see LEAK), at damping 0.85 (long cells), and without the
#: edges back to the explained token
SIXTH = ["ds:pow0.5:pm0.25", "ds:pow0.5:pm0.25:leak", "ds:pow0.5:pm0.25:leak0.5", "ds:pow0.5:pm0.25:d0.85",
         "ds:pow0.5:pm0.25:nosink"]
#: 'seventh': the default against the same two walks on edges tempered less (γ = 0.25, γ = 0)
SEVENTH = ["ds:pow0.5:pm0.25", "ds:pow0.25:pm0.25", "ds:pow0:pm0.25"]
#: 'seventh-decoders': the decoders' default (λ = 1, γ = 0.5) against γ = 0.25, with PR-TAG and GAE as references
SEVENTH_DECODERS = ["ds:pow0.5:pm", "ds:pow0.25:pm", "ds:pow0.5", "gae"]
#: 'eighth': the MPNet BBC News tune half, the 12-layer encoder's long documents: the default's two walks at γ = 0.5
#: and the depth rule's γ = 0.25, one walk at both (PR-TAG and γ = 0.25), the rule's walks times |gradient x input|,
#: GAE and the random control (LIG-50 runs beside them in its own process: ``--methods ig``)
EIGHTH_NEW = ["ds:pow0.25:pm0.25*absixg"]
EIGHTH = ["ds:pow0.5:pm0.25", "ds:pow0.25:pm0.25", "ds:pow0.5", "ds:pow0.25"] + EIGHTH_NEW + ["gae", "random"]
#: 'ninth': one walk (γ = 0.25 and PR-TAG's γ = 0.5) beside the seventh round's candidates, on the 12-layer
#: encoder's other tune halves (tweets, movie reviews), so that one walk on MPNet can be ranked by the rule
NINTH = SEVENTH + ["ds:pow0.5", "ds:pow0.25"]
#: the gate at the threshold the rule chose on the tune halves (``--ninth-table``'s scan), run as a method
GATED = ["ds:pow0.25:pm0.25:gate0.5"]
#: 'tenth': the ninth round's candidates and the same gate on the 6-layer encoder's default (γ = 0.5), on MiniLM-L6's
#: tune halves, so that a rule with the gate on every encoder can be ranked
TENTH_GATE = "ds:pow0.5:pm0.25:gate0.5"
TENTH = NINTH + [TENTH_GATE]
#: 'eleventh': the 12-layer default (the gate) against the same at damping 0.85 (the sixth round's lead on MPNet
#: reviews) and relative PageRank (see RELATIVE), on MPNet's tune halves ('eleventh-d85' and 'eleventh-hubs': parts
#: of it; 'eleventh-minilm': the 6-layer default and its hub variants, on MiniLM-L6's)
ELEVENTH_D85 = "ds:pow0.25:pm0.25:gate0.5:d0.85"
ELEVENTH_RELATIVE = ["ds:pow0.25:rel", "ds:pow0.25:rel0.5", "ds:pow0.25:rel-0.5",
                     "ds:pow0.25:pm0.25:gate0.5:rel0.5"]
ELEVENTH_HUBS = ["ds:pow0.25:pm0.25:gate0.5:rel-0.5", "ds:pow0.25:pm0.25:gate0.5:rel-1"]
ELEVENTH = GATED + [ELEVENTH_D85, "ds:pow0.25:pm0.25", "ds:pow0.25"] + ELEVENTH_RELATIVE + ELEVENTH_HUBS
#: the 6-layer encoder's default (``FOURTH_LEAD``, defined below) with hubs raised
ELEVENTH_MINILM = ["ds:pow0.5:pm0.25:rel-0.5", "ds:pow0.5:pm0.25:rel-1"]
#: the decoders' default (PR-TAG±, ``ds:pow0.5:pm``) and the same walks with hubs raised ('eleventh-decoders')
ELEVENTH_DECODERS = ["ds:pow0.5:pm", "ds:pow0.5:pm:rel-0.5", "ds:pow0.5:pm:rel-1"]
#: 'twelfth': the 12-layer default (hubs 0.5) and hubs 1 (eleventh round), against the default with one option changed
#: (TWELFTH_NEW), on the 12-layer encoder's long tune halves (MPNet reviews and BBC News), where LIG still leads
TWELFTH = ELEVENTH_HUBS + TWELFTH_NEW
#: 'thirteenth': each encoder's default against the same on the class's log-probability (LOG_PROB), on all eleven
#: encoder tune halves ('thirteenth-minilm' on MiniLM-L6's, 'thirteenth-mpnet' on MPNet's); 'thirteenth-decoders':
#: the decoders' default (PR-TAG±) against the same on the class's log-probability (SmolLM2's classification head)
THIRTEENTH_MINILM = [ELEVENTH_MINILM[0], "ds:pow0.5:pm0.25:rel-0.5:lp"]
THIRTEENTH_MPNET = [ELEVENTH_HUBS[0], "ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp"]
THIRTEENTH_DECODERS = ["ds:pow0.5:pm", "ds:pow0.5:lp:pm"]
#: 'fifteenth': the 12-layer default against itself plus gradient x input (ADDED_IXG) and with its heads averaged
#: signed (NetPowerGradient), on MPNet's tune halves
FIFTEENTH = [THIRTEENTH_MPNET[1]] + FIFTEENTH_NEW
#: 'fifteenth-minilm': the 6-layer default against the same with its heads averaged signed, on MiniLM-L6's halves
FIFTEENTH_MINILM_RUN = [THIRTEENTH_MINILM[1]] + FIFTEENTH_MINILM
#: 'sixteenth': the 12-layer default against it with its heads' pushes partly cancelled and net-masked, and its graphs
#: averaged along the IG path (SIXTEENTH_NEW), on MPNet's tune halves; 'sixteenth-minilm': the same on the 6-layer
#: default, on MiniLM-L6's
SIXTEENTH = [THIRTEENTH_MPNET[1]] + SIXTEENTH_NEW
SIXTEENTH_MINILM_RUN = [THIRTEENTH_MINILM[1]] + SIXTEENTH_MINILM
#: 'seventeenth': the 12-layer default against the same from a pass under conservative propagation, alone and times
#: that pass's gradient x input (SEVENTEENTH_NEW), with CP-LRP's relevance alone as a reference, on MPNet's tune halves;
#: 'seventeenth-minilm': the same on the 6-layer default, on MiniLM-L6's
SEVENTEENTH = [THIRTEENTH_MPNET[1]] + SEVENTEENTH_NEW + [CP_LRP]
SEVENTEENTH_MINILM_RUN = [THIRTEENTH_MINILM[1]] + SEVENTEENTH_MINILM + [CP_LRP]
TUNE_METHODS = [m for m in CANDIDATES if m not in EXTRA and m not in LATER and m not in FOURTH and m not in FIFTH
                and m not in SIXTH and m not in SEVENTH and m not in SEVENTH_DECODERS and m not in EIGHTH_NEW
                and m not in GATE and m not in RELATIVE and m != ELEVENTH_D85] \
    + REFERENCES
#: 'long': the candidates run on the 256-token cells (a long explanation costs ~10x a short one on this
#: shared CPU): each edge family, the interpolation, the best damping of the earlier BBC ablation (0.5)
LONG_METHODS = ["ds:g", "ds:ag", "ds:sg", "ds:pow0.25", "ds:pow0.5", "ds:pow0.75", "ds:ag:d0.5", "ds:pow0.5:d0.5",
                "gae", "random"]


def register_candidates() -> None:
    """Register every candidate as a benchmark method (idempotent)."""
    from captum_prxai.bench.methods import METHODS, Explainer, build_method, register_method

    for name, settings in CANDIDATES.items():
        if name in METHODS:
            continue

        def factory(model, forward_func, ctx, settings=settings, name=name):
            import captum_prxai

            kwargs = dict(settings)
            kwargs["edge_weight"] = _edge(kwargs["edge_weight"])
            if name in LOG_PROB:  # the library's objective (log_softmax over the classes before the backward pass)
                kwargs["objective"] = "log_probability"
            layers = captum_prxai.attention_layers(model)
            if name in LAYER_SHARE:  # a walk on the first or last share of the layers
                end, share = LAYER_SHARE[name]
                keep = max(1, round(len(layers) * share))
                layers = list(layers)[-keep:] if end == "late" else list(layers)[:keep]
            if name in RELATIVE and name in SIGNED_WALKS and name not in GATE:
                kwargs.update(walks="both", negative_weight=NEGATIVE_WEIGHT[name])
            if RELATIVE.get(name, 1.0) <= 0:  # raising the hubs (or neither): the library's hub_power scores it
                kwargs["hub_power"] = -RELATIVE[name]
            kwargs.setdefault("hub_power", 0.0)  # every other candidate walks without the hubs' weight
            kwargs.setdefault("objective", "output")  # and explains the logit
            # with the model's own gradient, its walk's scores not weighted by gradient x input, but for the
            # seventeenth round's candidates (CONSERVATIVE, CP_FUSED)
            kwargs.update(propagation="conservative" if name in CONSERVATIVE else "gradient",
                          relevance_weight=1.0 if name in CP_FUSED else 0.0)
            if name in GATE:  # the library's gate: both walks (W(A, -dA) of the same edges) in one pass, gated
                kwargs.update(walks="both", negative_weight=NEGATIVE_WEIGHT[name], walk_gate=GATE[name])
            attr = captum_prxai.PageRankAttribution(forward_func, layers, **kwargs)
            # what the attribution does not run by itself goes through _one_pass: NORM_WEIGHTED's per-layer term
            # (here) and ADDED_IXG's gradient x input (in explain)
            term = _gradient_norm_weighted(attr.spec) if name in NORM_WEIGHTED else None
            negative = None
            if name in SIGNED_WALKS and name not in GATE and name not in RELATIVE:
                gamma = kwargs["edge_weight"].gamma
                negative = captum_prxai.PageRankAttribution(forward_func, layers,
                                                            **{**kwargs, "edge_weight": NegativePowerGradient(gamma)})

            ixg = build_method("ixg", model, forward_func, ctx) if name in FUSED else None

            weight = NEGATIVE_WEIGHT.get(name, 1.0)

            def explain(ids, mask, special, target):
                if name in PATH:
                    return _path_scores(attr, model.get_input_embeddings(), ids, mask, special, target, PATH[name],
                                        ctx.pad_token_id)
                if name in ADDED_IXG:  # the capture's gradient x input at the first layer, from the same backward pass
                    built, scores = _one_pass(attr, ids, mask, target, input_gradient=True)
                    own = built.input_gradient.to(scores.dtype) * mask.to(scores.dtype)
                    return scores + ADDED_IXG[name] * own / own.abs().sum(-1, keepdim=True).clamp_min(1e-30)
                if RELATIVE.get(name, 0.0) > 0:  # dividing by the hubs: not a library option (it loses)
                    return _relative_scores(attr, ids, mask, target, RELATIVE[name])
                if name in LEAK:
                    built = attr.attribute_graph(ids, target=target, additional_forward_args=(mask,)).built
                    walk = [_leaky_walk(a, built.teleport, built.mask, kwargs["damping"], LEAK[name])
                            for a in (built.adjacency, built.negative)]
                    return walk[0] - kwargs["negative_weight"] * walk[1]
                if weight == "mass":
                    pos = attr.attribute_graph(ids, target=target, additional_forward_args=(mask,))
                    neg = negative.attribute_graph(ids, target=target, additional_forward_args=(mask,))
                    ratio = neg.adjacency.sum((1, 2)) / pos.adjacency.sum((1, 2)).clamp_min(1e-30)
                    return pos.scores - ratio.unsqueeze(-1).to(pos.scores.dtype) * neg.scores
                with _rms_norms_held(model) if name in HELD_RMS_NORMS else contextlib.nullcontext():
                    if term is not None:
                        scores = _one_pass(attr, ids, mask, target, layer_term=term)[1]
                    else:
                        scores = attr.attribute(ids, target=target, additional_forward_args=(mask,))
                if negative is not None:
                    against = negative.attribute(ids, target=target, additional_forward_args=(mask,))
                    if name in DEMOTE:
                        return torch.where(scores >= against, scores, scores - against)
                    scores = scores - weight * against
                if ixg is not None:
                    scores = scores * ixg(ids, mask, special, target).abs()
                return scores

            return Explainer(name, name, explain, attr)

        what = f"PageRankAttribution({settings})" + (" x gradient x input" if name in FUSED else "") + (
            " on the log-probability" if name in LOG_PROB else "") + (
            " minus the PageRank of the negative walk" if name in SIGNED_WALKS else "") + (
            " with gradient-norm layer weights" if name in NORM_WEIGHTED else "") + (
            f" plus {ADDED_IXG.get(name)} x gradient x input (unit L1 mass)" if name in ADDED_IXG else "") + (
            f" with its graphs averaged over {PATH.get(name)} inputs on the path of IG" if name in PATH else "") + (
            " under conservative propagation" if name in CONSERVATIVE else "") + (
            " times 1 + its gradient x input over the largest |gradient x input|" if name in CP_FUSED else "") + (
            f" over the global PageRank to the {RELATIVE.get(name)}" if name in RELATIVE else "")
        register_method(name, name, "pr-xai", what, factory)
    if CP_LRP not in METHODS:
        register_method(CP_LRP, "CP-LRP (one pass)", "gradient",
                        "gradient x input at the word embeddings under conservative propagation (CP-LRP, Ali et al. "
                        "2022): the seventeenth round's reference", _cp_lrp_factory)


def _cp_lrp_factory(model, forward_func, ctx):
    """Input x Gradient (Captum's ``LayerGradientXActivation`` on the embeddings) under the library's
    :func:`~captum_prxai.conservative.conservative_propagation`."""
    from captum_prxai.bench.methods import Explainer, build_method
    from captum_prxai.conservative import conservative_propagation

    ixg = build_method("ixg", model, forward_func, ctx)

    def explain(ids, mask, special, target):
        with conservative_propagation():
            return ixg(ids, mask, special, target)

    return Explainer(CP_LRP, "CP-LRP (one pass)", explain, ixg.attribution)


# ----------------------------------------------------------------------------- cells
@dataclass(frozen=True)
class Cell:
    architecture: str
    dataset: str
    model: str
    #: examples per half (tune, holdout) and wordpiece budget
    n_tune: int
    n_holdout: int
    max_length: Optional[int] = None

    @property
    def name(self) -> str:
        return f"{self.architecture}--{self.dataset}"


CELLS: Dict[str, Cell] = {c.name: c for c in [
    Cell("minilm", "movie-sentences", "default", 100, 100),
    Cell("minilm", "uncertainty", "minilm-uncertainty", 100, 100),
    Cell("minilm", "tweets", "minilm-tweets", 100, 100),
    # long documents at 256 wordpieces (the models were trained at 256)
    Cell("minilm", "bbc-news", "minilm-bbc-news", 40, 40, max_length=256),
    Cell("minilm", "spam", "minilm-spam", 24, 25, max_length=256),  # the whole half
    Cell("mpnet", "tweets", "mpnet-tweets", 30, 50),
    # fourth round: held-out checks on the matrix's other MPNet cells (same models, lengths and examples)
    Cell("mpnet", "uncertainty", "mpnet-uncertainty", 30, 200),
    Cell("mpnet", "movie-sentences", "mpnet-movie-sentences", 30, 100),
    Cell("mpnet", "movie-reviews", "mpnet-movie-reviews", 30, 50, max_length=256),
    Cell("minilm", "movie-reviews", "minilm-movie-reviews", 30, 73),  # 512 wordpieces, as in the matrix
    # decoders: the metrics keep the explained last token (run_benchmark's protect_explained)
    Cell("smollm2", "tweets", "smollm2-tweets", 50, 50),
    Cell("smollm2", "uncertainty", "smollm2-uncertainty", 50, 50),
    # seventh round: two more decoder domains for the decoders' γ (the matrix's models, at its lengths)
    Cell("smollm2", "movie-sentences", "smollm2-movie-sentences", 50, 100),
    Cell("smollm2", "bbc-news", "smollm2-bbc-news", 30, 100, max_length=256),
    # eighth round: the 12-layer encoder's long documents (the matrix's model, at its length)
    Cell("mpnet", "bbc-news", "mpnet-bbc-news", 30, 100, max_length=256),
]}


def out_dir(cell: Cell, half: str) -> Path:
    return RESULTS / half / cell.name


def run_cell(cell: Cell, half: str, methods: Sequence[str], n: Optional[int], argv: Sequence[str],
             out: Optional[Path] = None, max_length: Optional[int] = None) -> Path:
    from captum_prxai.bench.ablation import dataset_half
    from captum_prxai.bench.runner import run_benchmark, write_command
    from captum_prxai.data import load_dataset
    from captum_prxai.models import load_default, load_model

    register_candidates()
    model, tokenizer = load_default() if cell.model == "default" else load_model(cell.model)
    dataset = dataset_half(load_dataset(cell.dataset, "test"), half)
    out = out or out_dir(cell, half)
    n = n or (cell.n_tune if half == "tune" else cell.n_holdout)
    # steps=1: comprehensiveness and sufficiency (the two metrics used here) do not depend on the
    # deletion-curve steps, which would cost 20 more forward passes per explanation
    run_benchmark(model, tokenizer, dataset, list(methods), n=n, out_dir=out, model_name=cell.model,
                  max_length=max_length or cell.max_length, progress=False, steps=STEPS)
    write_command(out, "python benchmarks/default_search.py", argv)
    return out / "summary.md"


# ----------------------------------------------------------------------------- the selection rule
def _read_csv(path: Path, columns: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, Dict[int, float]]]:
    """``{metric: {method: {example: value}}}`` from a run's ``results.csv`` (the two metrics, or ``columns``)."""
    columns = columns or [metric for metric, _ in METRICS]
    values: Dict[str, Dict[str, Dict[int, float]]] = {c: {} for c in columns}
    with path.open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            for column in columns:
                values[column].setdefault(row["method"], {})[int(row["example"])] = float(row[column])
    return values


def _paired(values: Dict[str, Dict[str, Dict[int, float]]], method: str, other: str,
            metrics: Optional[Sequence[str]] = None) -> Tuple[int, str]:
    """``n`` and ``"comp. / suff."`` of ``method − other`` on their common examples ('' if either is missing); with
    ``metrics``, those columns of ``values`` instead of the two metrics."""
    parts, n = [], 0
    for metric in metrics or [m for m, _ in METRICS]:
        a, b = values[metric].get(method), values[metric].get(other)
        if not a or not b:
            return 0, ""
        common = sorted(set(a) & set(b))
        n = len(common)
        parts.append(_fmt(*_mean_sem([a[e] - b[e] for e in common])))
    return n, " / ".join(parts)


#: the constructions the held-out halves check against PR-TAG (γ = 0.25 and the gradient-norm layer weights)
HOLDOUT_LATER = ["ds:pow0.25", "ds:pow0.5:l2w"]


def write_later_table(half: str = "tune", reference: str = "ds:pow0.5",
                      path: Optional[Path] = None, methods: Optional[Sequence[str]] = None) -> Path:
    """Each 'later' construction minus ``reference``, paired, per cell: ``results/default-search/later.md`` for
    the tune halves (``LATER``), ``later-holdout.md`` for the held-out ones (``HOLDOUT_LATER``); a cell without
    a construction leaves its column blank."""
    methods = list(methods or (LATER if half == "tune" else HOLDOUT_LATER))
    command = "python benchmarks/default_search.py --later-table" + ("" if half == "tune" else f" --half {half}")
    rows = ["# The later constructions against PR-TAG, paired on the same examples", "",
            f"`{command}` (the {half} halves; mean ± s.e. of the per-example "
            f"difference construction − `{reference}`; comprehensiveness: > 0 is better, sufficiency: < 0 is better).",
            "", "| cell | n | " + " | ".join(f"{m} − {reference} (comp. / suff.)" for m in methods) + " |",
            "|---|---|" + "---|" * len(methods)]
    for cell, csv_path in _finished(half):
        values = _read_csv(csv_path)
        present = [m for m in methods if m in values["comprehensiveness"]]
        if reference not in values["comprehensiveness"] or not present:
            continue
        parts, n = [], 0
        for method in methods:
            k, text = _paired(values, method, reference) if method in present else (n, "")
            n = k
            parts.append(text)
        rows.append(f"| {cell.name} | {n} | " + " | ".join(parts) + " |")
    path = path or RESULTS / ("later.md" if half == "tune" else f"later-{half}.md")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


FOURTH_DIR = RESULTS / "fourth"
#: what the fourth round's held-out runs are paired with: the matrix's methods on the same examples
FOURTH_MATRIX = ("pr-tag", "pr-tag-pm", "gae", "ig", "attnlrp", "lime", "kernel-shap")


#: the fourth round's lead construction (smallest worst case on the tune halves), checked on every held-out half
FOURTH_LEAD = "ds:pow0.5:pm0.25"


def _level_or_ahead(values: Dict[str, Dict[str, Dict[int, float]]], method: str, other: str) -> Optional[bool]:
    """The goal's test against ``other``: on both metrics, better or within one paired standard error."""
    for metric, higher in METRICS:
        a, b = values[metric].get(method), values[metric].get(other)
        if not a or not b:
            return None
        common = sorted(set(a) & set(b))
        mean, sem = _mean_sem([(a[e] - b[e]) * (1.0 if higher else -1.0) for e in common])
        if mean < -sem:
            return False
    return True


#: architectures whose attention is causal (the default walks both ways there; the fourth round asks about encoders)
DECODERS = {"smollm2"}


def _same_runs(mine: Dict[str, Dict[str, Dict[int, float]]], theirs: Dict[str, Dict[str, Dict[int, float]]],
               method: str, tol: float = 1e-6) -> bool:
    """Whether ``method`` gave the same metrics on every common example in both runs (same model and examples)."""
    for metric, _ in METRICS:
        a, b = mine[metric].get(method, {}), theirs[metric].get(method, {})
        common = set(a) & set(b)
        if not common or any(abs(a[e] - b[e]) > tol for e in common):
            return False
    return True


def _add_matrix_rows(values: Dict[str, Dict[str, Dict[int, float]]], matrix: Dict[str, Dict[str, Dict[int, float]]],
                     names: Sequence[str], examples: Optional[set] = None) -> None:
    """Add the matrix's rows of ``names`` to ``values`` as ``matrix:<name>`` (in place); with ``examples``, only
    methods the matrix ran on all of them, cut to them."""
    for name in names:
        for metric, _ in METRICS:
            got = matrix[metric].get(name)
            if not got or (examples is not None and not examples <= set(got)):
                continue
            values[metric][f"matrix:{name}"] = got if examples is None else {e: got[e] for e in examples}


#: a run's rows pair with the matrix's only when the explained-class probabilities of their common examples agree
#: to this (the same model; ``run_benchmark(merge=True)`` checks the same)
SAME_MODEL_TOLERANCE = 1e-4


def _probabilities(path: Path) -> Dict[int, float]:
    """``{example: the explained class's probability before any removal}`` from a run's ``results.csv``."""
    with path.open(newline="", encoding="utf-8") as fh:
        return {int(row["example"]): float(row["prob"]) for row in csv.DictReader(fh)}


def _model_difference(run_csv: Path, matrix_csv: Path) -> Optional[float]:
    """The largest difference in the explained class's probability between a run and the matrix cell on their
    common examples (0 for the same model; None if they share none)."""
    mine, theirs = _probabilities(run_csv), _probabilities(matrix_csv)
    common = set(mine) & set(theirs)
    return max(abs(mine[e] - theirs[e]) for e in common) if common else None


def _same_model(run_csv: Path, matrix_csv: Path) -> bool:
    difference = _model_difference(run_csv, matrix_csv)
    return difference is not None and difference <= SAME_MODEL_TOLERANCE


def _with_matrix(cell: Cell, values: Dict[str, Dict[str, Dict[int, float]]],
                 run_csv: Path) -> Dict[str, Dict[str, Dict[int, float]]]:
    """``values`` with the committed matrix's FOURTH_MATRIX rows of the cell added as ``matrix:<name>`` (in place),
    where the run (``run_csv``) and the matrix cell come from the same model (:func:`_same_model`): pairs across two
    models would compare explanations of different classifiers."""
    matrix_csv = MATRIX_DIR / cell.name / "results.csv"
    if matrix_csv.is_file() and _same_model(run_csv, matrix_csv):
        _add_matrix_rows(values, _read_csv(matrix_csv), FOURTH_MATRIX)
    return values


def _fourth_goal_table(lead: str, held_out: Dict[str, Dict[str, Dict[str, Dict[int, float]]]]) -> List[str]:
    """One row per held-out cell (``held_out``: its run with the matrix's rows added): the lead construction
    against PR-TAG, GAE, LIG and AttnLRP, and the goal."""
    rows = []
    for name, values in held_out.items():
        if lead not in values["comprehensiveness"] or "matrix:pr-tag" not in values["comprehensiveness"]:
            continue
        n, _ = _paired(values, lead, "ds:pow0.5")
        row = [name, str(n)] + [_paired(values, lead, o)[1] for o in
                                     ("ds:pow0.5", "matrix:gae", "matrix:ig", "matrix:attnlrp")]
        verdicts = {o: _level_or_ahead(values, lead, f"matrix:{o}") for o in ("gae", "ig")}
        failed = [o.upper() if o == "gae" else "LIG" for o, ok in verdicts.items() if ok is False]
        row.append("not met (" + ", ".join(failed) + ")" if failed else "met")
        rows.append(row)
    if not rows:
        return []
    return ["", f"## The lead construction `{lead}` on the held-out halves", "",
            "Paired differences, construction − method, on the matrix's examples (`ds:pow0.5` is PR-TAG rerun "
            "here; GAE, LIG-50 and AttnLRP are the committed matrix's rows). Goal: better or within one paired "
            "standard error of GAE and LIG on both metrics.", ""] + _table(
        ["cell", "n", "− PR-TAG", "− GAE", "− LIG", "− AttnLRP", "goal"], rows) + [""]


def write_fourth_table(path: Optional[Path] = None) -> Path:
    """``results/default-search/fourth.md``: the fourth round's constructions, tune halves then held-out halves.

    Tune halves: each construction minus PR-TAG (``ds:pow0.5``, rerun in the same process, so the pairing is
    exact), and its worst case by the search's rule over the cells, with the cell's earlier candidates (the
    cell's ``tune/<cell>/results.csv``, same examples) among the "others". Held-out halves: each construction
    minus the committed matrix's methods on the same examples (the matrix's PR-TAG against this run's is the
    pairing check)."""
    register_candidates()
    lines = ["# Fourth round: more one-pass constructions, paired on the same examples", "",
             "`python benchmarks/default_search.py --fourth-table`. Mean ± s.e. of the per-example difference "
             "(comprehensiveness: > 0 is better; sufficiency: < 0 is better). Each run's command is in its folder's "
             "`COMMAND`.", ""]
    worst: Dict[str, Tuple[float, float, str]] = {}
    cells_seen: Dict[str, int] = {}
    unmatched: List[str] = []
    held_out: Dict[str, Dict[str, Dict[str, Dict[int, float]]]] = {}
    for half in ("tune", "holdout"):
        folders = [(c, FOURTH_DIR / half / c.name / "results.csv") for c in CELLS.values()
                   if (FOURTH_DIR / half / c.name / "results.csv").is_file()]
        if not folders:
            continue
        runs = {c.name: _read_csv(p) for c, p in folders}
        methods = [m for m in FOURTH if any(m in v["comprehensiveness"] for v in runs.values())]
        if half == "tune":
            lines += ["## Tune halves: each construction − PR-TAG (`ds:pow0.5`)", ""]
            header = ["cell", "n"] + [f"`{m}`" for m in methods if m != "ds:pow0.5"]
            rows = []
            for cell, _ in folders:
                values = runs[cell.name]
                row, n = [], 0
                for m in methods:
                    if m == "ds:pow0.5":
                        continue
                    k, text = _paired(values, m, "ds:pow0.5")
                    n = max(n, k)
                    row.append(text)
                rows.append([cell.name, str(n)] + row)
                earlier = out_dir(cell, "tune") / "results.csv"
                matched = earlier.is_file() and _same_runs(values, _read_csv(earlier), "ds:pow0.5")
                if earlier.is_file() and not matched:
                    unmatched.append(cell.name)
                if cell.architecture in DECODERS:  # reported above, not ranked: the encoder default is asked
                    continue
                merged = {metric: dict(v) for metric, v in values.items()}
                if matched:
                    for metric, table in _read_csv(earlier).items():
                        for m, got in table.items():
                            merged[metric].setdefault(m, got)
                pool = list(merged["comprehensiveness"])
                for m, by_metric in cell_losses(merged, pool).items():
                    if m not in methods:
                        continue
                    cells_seen[m] = cells_seen.get(m, 0) + 1
                    for metric, got in by_metric.items():
                        if m not in worst or got["loss"] > worst[m][0]:
                            worst[m] = (got["loss"], got["sem"], f"{cell.name} {metric}, to `{got['best']}`")
            lines += _table(header, rows) + [""]
            decoder_rows = []
            for cell, _ in folders:
                if cell.architecture not in DECODERS or "ds:pow0.5:pm" not in runs[cell.name]["comprehensiveness"]:
                    continue
                present = [m for m in methods if m != "ds:pow0.5:pm" and m in runs[cell.name]["comprehensiveness"]]
                decoder_rows.append([cell.name] + [f"`{m}`: {_paired(runs[cell.name], m, 'ds:pow0.5:pm')[1]}"
                                                   for m in present])
            if decoder_rows:
                lines += ["Decoders, against their default (PR-TAG±, `ds:pow0.5:pm`), construction − PR-TAG±:", ""]
                lines += ["| cell | " + " | ".join("construction" for _ in decoder_rows[0][1:]) + " |",
                          "|---|" + "---|" * (len(decoder_rows[0]) - 1)]
                lines += ["| " + " | ".join(r) + " |" for r in decoder_rows] + [""]
            if unmatched:
                lines += [f"Not merged with the earlier rounds (this run's PR-TAG differs from theirs, so the model was "
                          f"retrained differently): {', '.join(unmatched)}; those rows pair within this run only.",
                          ""]
            lines += ["Worst case by the search's rule over the **encoder** cells above (the largest paired loss to the "
                      "best other method of the cell, both metrics; the cell's earlier candidates and GAE count as "
                      "others; the decoder rows are shown, not ranked):", ""]
            ranked = sorted(worst, key=lambda m: worst[m][0])
            lines += _table(["construction", "cells", "worst case", "where"],
                            [[f"`{m}`", str(cells_seen[m]), _fmt(*worst[m][:2]), worst[m][2]] for m in ranked]) + [""]
        else:
            lines += ["## Held-out halves: each construction − the matrix's methods (same examples)", ""]
            for cell, run_csv in folders:
                values = _with_matrix(cell, runs[cell.name], run_csv)
                held_out[cell.name] = values
                others = [f"matrix:{m}" for m in FOURTH_MATRIX if f"matrix:{m}" in values["comprehensiveness"]]
                rows = []
                for m in methods:
                    row, n = [], 0
                    for o in others:
                        k, text = _paired(values, m, o)
                        n = max(n, k)
                        row.append(text)
                    if n:
                        rows.append([f"`{m}`", str(n)] + row)
                lines += [f"### {cell.name}", ""] + _table(["construction", "n"] + [f"− {o[7:]}" for o in others],
                                                           rows) + [""]
    lines += _fourth_goal_table(FOURTH_LEAD, held_out)
    path = path or RESULTS / "fourth.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


FIFTH_DIR = RESULTS / "fifth"
SIXTH_DIR = RESULTS / "sixth"
SEVENTH_DIR = RESULTS / "seventh"
SEVENTH_DECODERS_DIR = RESULTS / "seventh-decoders"
EIGHTH_DIR = RESULTS / "eighth"
NINTH_DIR = RESULTS / "ninth"
TENTH_DIR = RESULTS / "tenth"
ELEVENTH_DIR = RESULTS / "eleventh"
TWELFTH_DIR = RESULTS / "twelfth"
THIRTEENTH_DIR = RESULTS / "thirteenth"
THIRTEENTH_DECODERS_DIR = RESULTS / "thirteenth-decoders"
#: the fourteenth round: the decoders' default on the class's log-probability (THIRTEENTH_DECODERS) on the decoder
#: tune halves the thirteenth round did not run (SmolLM2 uncertainty, sentences, BBC News), then held out
FOURTEENTH_DIR = RESULTS / "fourteenth"
#: the fifteenth round: the 12-layer default against it plus gradient x input, and with its heads averaged signed
#: (FIFTEENTH_NEW), on MPNet's tune halves; the 6-layer default with its heads averaged signed on MiniLM-L6's
FIFTEENTH_DIR = RESULTS / "fifteenth"
#: the sixteenth round: each encoder's default against it with its heads' pushes partly cancelled and net-masked,
#: and with its graphs averaged along the path of Integrated Gradients (SIXTEENTH_NEW, SIXTEENTH_MINILM), on the
#: encoder tune halves
SIXTEENTH_DIR = RESULTS / "sixteenth"
#: ... and the decoders' default with the hubs' weight (SIXTEENTH_DECODERS), on the decoder tune halves
SIXTEENTH_DECODERS_DIR = RESULTS / "sixteenth-decoders"
#: ... and the decoders' default against the same (SEVENTEENTH_DECODERS), on the decoder tune halves
SEVENTEENTH_DECODERS_DIR = RESULTS / "seventeenth-decoders"
#: the seventeenth round: each encoder's default against the same from a pass under conservative propagation, alone
#: and times that pass's gradient x input (SEVENTEENTH_NEW, SEVENTEENTH_MINILM), and CP-LRP, on the encoder tune halves
SEVENTEENTH_DIR = RESULTS / "seventeenth"
#: the decoder rounds' folders whose run of a decoder tune half a later decoder round joins (the third round's runs
#: are in ``RESULTS/tune``)
DECODER_JOINS = (RESULTS, FOURTH_DIR, SEVENTH_DECODERS_DIR, RESULTS / "eleventh-decoders", THIRTEENTH_DECODERS_DIR)
#: the rounds written by ``_round_table``: flag -> (folder, methods, title, file, candidates ranked by the rule)
ROUNDS = {
    "--fifth-table": (FIFTH_DIR, FIFTH, "Fifth round: the default's damping, and LIG-50 on the tune halves", "fifth.md",
                      ()),
    "--sixth-table": (SIXTH_DIR, SIXTH, "Sixth round: leaky walks, no edges back to [CLS], damping 0.85 on long inputs",
                      "sixth.md", ()),
    "--seventh-table": (SEVENTH_DIR, SEVENTH, "Seventh round: the default's two walks on edges tempered less",
                        "seventh.md", ("ds:pow0.5:pm0.25", "ds:pow0.25:pm0.25", "rule:depth")),
    "--seventh-decoders-table": (SEVENTH_DECODERS_DIR, SEVENTH_DECODERS,
                                 "Seventh round, decoders: the decoders' two walks (λ = 1) on edges tempered less",
                                 "seventh-decoders.md", ("ds:pow0.5:pm", "ds:pow0.25:pm")),
    "--eighth-table": (EIGHTH_DIR, EIGHTH + ["ig"],
                       "Eighth round: the 12-layer encoder's long documents (MPNet BBC News tune half)", "eighth.md",
                       ("ds:pow0.5:pm0.25", "ds:pow0.25:pm0.25", "rule:depth")),
    "--ninth-table": (NINTH_DIR, NINTH + GATED,
                      "Ninth round: one walk on the 12-layer encoder, and a gate per example", "ninth.md",
                      ("ds:pow0.5:pm0.25", "ds:pow0.25:pm0.25", "rule:depth", "rule:depth-one-walk",
                       "rule:depth-gate")),
    "--tenth-table": (TENTH_DIR, TENTH, "Tenth round: the gate on the 6-layer encoder (MiniLM-L6)", "tenth.md",
                      ("ds:pow0.5:pm0.25", "ds:pow0.25:pm0.25", "rule:depth-gate", "rule:gate-every-encoder")),
    "--eleventh-table": (ELEVENTH_DIR, ELEVENTH + ELEVENTH_MINILM + ["ig"],
                         "Eleventh round: the 12-layer default at damping 0.85, and relative PageRank", "eleventh.md",
                         ("rule:depth-gate", "rule:depth-gate-hubs", "rule:depth-gate-hubs0.5")),
    "--twelfth-table": (TWELFTH_DIR, TWELFTH + ["ig"],
                        "Twelfth round: the 12-layer default's graph options on its long tune halves", "twelfth.md",
                        ()),
    "--thirteenth-table": (THIRTEENTH_DIR, THIRTEENTH_MPNET + THIRTEENTH_MINILM,
                           "Thirteenth round: the class's log-probability on every encoder tune half",
                           "thirteenth.md", ("rule:depth-gate-hubs0.5", "rule:depth-gate-hubs0.5-lp")),
    "--fourteenth-table": (FOURTEENTH_DIR, THIRTEENTH_DECODERS,
                           "Fourteenth round: the class's log-probability on every decoder tune half",
                           "fourteenth.md", tuple(THIRTEENTH_DECODERS)),
    "--fifteenth-table": (FIFTEENTH_DIR, FIFTEENTH + FIFTEENTH_MINILM,
                          "Fifteenth round: the 12-layer default plus gradient x input, and its heads averaged signed",
                          "fifteenth.md", ()),
    "--sixteenth-table": (SIXTEENTH_DIR, SIXTEENTH + SIXTEENTH_MINILM + [FIFTEENTH_NEW[-1]],
                          "Sixteenth round: the default with its heads' pushes partly cancelled, net-masked or "
                          "scaled by their agreement, and its graphs averaged along the IG path",
                          "sixteenth.md", ()),
    "--sixteenth-decoders-table": (SIXTEENTH_DECODERS_DIR, SIXTEENTH_DECODERS,
                                   "Sixteenth round, decoders: the decoders' default with the hubs' weight",
                                   "sixteenth-decoders.md", ()),
    "--seventeenth-table": (SEVENTEENTH_DIR, SEVENTEENTH + SEVENTEENTH_MINILM,
                            "Seventeenth round: the default from a pass under conservative propagation, alone and "
                            "times that pass's gradient x input, and CP-LRP", "seventeenth.md",
                            ("rule:depth-gate-hubs0.5-lp", "rule:depth-gate-hubs0.5-lp-cp",
                             "rule:depth-gate-hubs0.5-lp-cp-rel")),
    "--seventeenth-decoders-table": (SEVENTEENTH_DECODERS_DIR, SEVENTEENTH_DECODERS,
                                     "Seventeenth round, decoders: the decoders' default from the conservative pass, "
                                     "times its gradient x input, and with the RMSNorm scales held too",
                                     "seventeenth-decoders.md", ()),
}
#: a round whose worst case runs over other rounds' tune halves too: flag -> the rounds' folders (each half from the
#: first folder that has it)
ROUND_WORST_FOLDERS: Dict[str, Tuple[Path, ...]] = {"--eighth-table": (EIGHTH_DIR, SEVENTH_DIR),
                                                    "--ninth-table": (NINTH_DIR, EIGHTH_DIR, SEVENTH_DIR),
                                                    "--tenth-table": (TENTH_DIR, NINTH_DIR, EIGHTH_DIR),
                                                    "--eleventh-table": (ELEVENTH_DIR,),
                                                    "--thirteenth-table": (THIRTEENTH_DIR,),
                                                    "--fourteenth-table": (FOURTEENTH_DIR, THIRTEENTH_DECODERS_DIR),
                                                    "--seventeenth-table": (SEVENTEENTH_DIR,)}
#: a round's held-out runs when they are not its ranked candidates: flag -> (the default, the candidates)
ROUND_HOLDOUT: Dict[str, Tuple[str, ...]] = {"--eighth-table": ("ds:pow0.25:pm0.25", "ds:pow0.25"),
                                             "--ninth-table": ("ds:pow0.25:pm0.25", "ds:pow0.25") + tuple(GATED),
                                             "--tenth-table": ("ds:pow0.5:pm0.25", "ds:pow0.5", TENTH_GATE),
                                             "--eleventh-table": (GATED[0], ELEVENTH_HUBS[0]),
                                             "--twelfth-table": (*ELEVENTH_HUBS, "ds:pow0.25:pm0.25:gate0.5:rel-2",
                                                                 "ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp"),
                                             "--thirteenth-table": tuple(THIRTEENTH_MPNET),
                                             "--fifteenth-table": (THIRTEENTH_MPNET[1], FIFTEENTH_NEW[-1]),
                                             "--sixteenth-table": (THIRTEENTH_MPNET[1], SIXTEENTH_NEW[0])}
#: a line after a round's worst case: flag -> text
ROUND_NOTES: Dict[str, str] = {
    "--seventeenth-table": "Each half is also joined with the thirteenth, fifteenth and sixteenth rounds' runs of it "
                           "(and, through the thirteenth's, the earlier rounds') where the architecture's default "
                           "agrees to the same tolerance (`_add_log_probability_rows`), so every construction measured "
                           "on a half is a possible best other. The rules take each architecture's rows: "
                           "`rule:depth-gate-hubs0.5-lp` the default, `-cp` the same from the conservative pass, "
                           "`-cp-rel` that times 1 + R / max|R|. `cp-lrp` (CP-LRP's relevance alone, not a walk) is a "
                           "reference, never a best other.\n",
    "--eighth-table": "One walk (`ds:pow0.5`, PR-TAG, and `ds:pow0.25`) is not ranked: it has no rows on the "
                      "seventh round's movie-review tune halves, so its worst case would leave out the halves where "
                      "two walks were chosen. On this half it is every candidate's best other; the held-out table "
                      "below has one walk on the four long encoder cells.",
    "--eleventh-table": "Each half is also joined with the tenth, ninth and eighth rounds' runs of it where the "
                        "architecture's two walks agree to the same tolerance (`_add_earlier_rows`), so every "
                        "construction measured on a half is a possible best other. The held-out rows of the "
                        "12-layer default are read from its two walks and the gate's correlations, as in the ninth "
                        "round.",
    "--thirteenth-table": "Each half is also joined with the eleventh round's run of it (and so with the earlier "
                          "rounds' runs the eleventh joined) where the architecture's default agrees to the same "
                          "tolerance (`_add_eleventh_rows`), so every construction measured on a half is a possible "
                          "best other. The MPNet reviews and BBC News halves are not joined with the twelfth round's "
                          "constructions, which ran on 16 examples (the losses are paired over the examples every "
                          "method of a half explained).",
    "--fourteenth-table": "SmolLM2 tweets is the thirteenth round's run of its tune half. Each half is also joined "
                          "with every earlier decoder round's run of it (the third, fourth, seventh, eleventh and "
                          "thirteenth) where PR-TAG± agrees to the same tolerance (`_add_decoder_rows`), so every "
                          "construction measured on a half is a possible best other."}
#: methods a round ran beside its candidates that are not candidates for the default, so never a half's 'best other'
#: in the worst case (LIG-50 costs 50 passes; the goal's comparison with it is on the held-out halves)
NOT_CANDIDATES = ("ig", CP_LRP)
#: the 12-layer encoders' default, the lead of the rounds on MPNet
_MPNET_LEAD = ("ds:pow0.25:pm0.25", "pr-tag0.25-pm0.25",
               "the 12-layer encoders' default: A^0.25 ⊙ dA⁺ edges, two walks, λ = 0.25, damping 0.7")
#: the 12-layer encoders' default since the thirteenth round (the class's log-probability)
_LP_LEAD = (THIRTEENTH_MPNET[1], "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp",
            "the 12-layer encoders' default: A^0.25 ⊙ dA⁺ edges, two walks, λ = 0.25, gate 0.5, hubs 0.5, damping 0.7, "
            "the class's log-probability")
#: the decoders' default since the fourteenth round (the class's log-probability), the lead of the later decoder rounds
_DECODER_LP_LEAD = (SIXTEENTH_DECODERS[0], "pr-tag-pm-lp",
                    "the decoders' default: PR-TAG's edges, two walks, λ = 1, damping 0.7, the class's log-probability")
#: a round's default, if not the encoders' (``FOURTH_LEAD``): flag -> (its candidate name, its matrix name, what it is)
ROUND_LEADS: Dict[str, Tuple[str, str, str]] = {
    "--seventh-decoders-table": ("ds:pow0.5:pm", "pr-tag-pm",
                                 "the decoders' default: PR-TAG's edges, two walks, λ = 1, damping 0.7"),
    "--eighth-table": _MPNET_LEAD,
    "--ninth-table": _MPNET_LEAD,
    "--eleventh-table": (GATED[0], "pr-tag0.25-pm0.25-gate0.5",
                         "the 12-layer encoders' default: A^0.25 ⊙ dA⁺ edges, two walks, λ = 0.25, gate 0.5, "
                         "damping 0.7"),
    "--twelfth-table": (ELEVENTH_HUBS[0], "pr-tag0.25-pm0.25-gate0.5-hubs0.5",
                        "the 12-layer encoders' default: A^0.25 ⊙ dA⁺ edges, two walks, λ = 0.25, gate 0.5, "
                        "hubs 0.5, damping 0.7"),
    "--thirteenth-table": (ELEVENTH_HUBS[0], "pr-tag0.25-pm0.25-gate0.5-hubs0.5",
                           "each encoder's default, on MPNet A^0.25 ⊙ dA⁺ edges, two walks, λ = 0.25, gate 0.5, "
                           "hubs 0.5, damping 0.7"),
    "--fourteenth-table": ("ds:pow0.5:pm", "pr-tag-pm",
                           "the decoders' default: PR-TAG's edges, two walks, λ = 1, damping 0.7, the logit"),
    "--fifteenth-table": _LP_LEAD,
    "--sixteenth-table": _LP_LEAD,
    "--seventeenth-table": _LP_LEAD,
    "--sixteenth-decoders-table": _DECODER_LP_LEAD,
    "--seventeenth-decoders-table": _DECODER_LP_LEAD}
#: the encoders' default, the lead of the other rounds
_ENCODER_LEAD = (FOURTH_LEAD, "pr-tag-pm0.25", "PR-TAG's edges, two walks, λ = 0.25, damping 0.7")
#: rules ranked beside the candidates: per architecture, the candidate whose rows the rule takes on its halves.
#: 'rule:depth': γ = 0.25 on the 12-layer encoder (MPNet), the default's γ = 0.5 on the 6-layer one (MiniLM-L6);
#: the library's ``attention_power="auto"`` (captum_prxai.recommended_spec)
#: 'rule:depth-one-walk': the same, with one walk (γ = 0.25) on the 12-layer encoder; 'rule:depth-gate': with the
#: gate (see GATE) on it, its threshold chosen by the rule (``_gate_scan_lines``); 'rule:gate-every-encoder': the
#: same gate at 0.5 on the 6-layer encoder's default too (tenth round); 'rule:depth-gate-hubs' and '...-hubs0.5': the
#: depth-gate rule's walks with hubs raised, each walk's PageRank times its graph's global PageRank (β = −1) or its
#: square root (β = −0.5; see RELATIVE; eleventh round)
RULES: Dict[str, Dict[str, str]] = {"rule:depth": {"minilm": "ds:pow0.5:pm0.25", "mpnet": "ds:pow0.25:pm0.25"},
                                    "rule:depth-one-walk": {"minilm": "ds:pow0.5:pm0.25", "mpnet": "ds:pow0.25"},
                                    "rule:depth-gate": {"minilm": "ds:pow0.5:pm0.25", "mpnet": GATED[0]},
                                    "rule:gate-every-encoder": {"minilm": TENTH_GATE, "mpnet": GATED[0]},
                                    "rule:depth-gate-hubs": {"minilm": ELEVENTH_MINILM[1], "mpnet": ELEVENTH_HUBS[1]},
                                    "rule:depth-gate-hubs0.5": {"minilm": ELEVENTH_MINILM[0],
                                                                "mpnet": ELEVENTH_HUBS[0]},
                                    "rule:depth-gate-hubs0.5-lp": {"minilm": THIRTEENTH_MINILM[1],
                                                                   "mpnet": THIRTEENTH_MPNET[1]},
                                    "rule:depth-gate-hubs0.5-lp-cp": {"minilm": SEVENTEENTH_MINILM[0],
                                                                      "mpnet": SEVENTEENTH_NEW[0]},
                                    "rule:depth-gate-hubs0.5-lp-cp-rel": {"minilm": SEVENTEENTH_MINILM[1],
                                                                          "mpnet": SEVENTEENTH_NEW[1]}}
#: a fourth-round tune run joins a later round's run of the same cell in the worst case only when the default's
#: comprehensiveness agrees on every common example to this (the same model and examples)
SAME_RUN_TOLERANCE = 1e-2


#: ``{metric: {method: {example: value}}}``, as :func:`_read_csv` returns it
Values = Dict[str, Dict[str, Dict[int, float]]]


def _round_runs(folder: Path, lead: str = FOURTH_LEAD) -> Iterator[Tuple[Cell, Values, Optional[Values],
                                                                        Optional[float]]]:
    """Each tune half a round ran: ``(cell, its values, the fourth round's values of that half or None, the
    default's (``lead``'s) largest comprehensiveness difference between the two runs on their common examples or
    None)``."""
    for cell in CELLS.values():
        csv_path = folder / "tune" / cell.name / "results.csv"
        if not csv_path.is_file():
            continue
        values = _read_csv(csv_path)
        earlier = FOURTH_DIR / "tune" / cell.name / "results.csv"
        theirs = _read_csv(earlier) if earlier.is_file() else None
        yield cell, values, theirs, None if theirs is None else _lead_difference(values, theirs, lead)


def _lead_difference(values: Values, theirs: Values, lead: str) -> Optional[float]:
    """``lead``'s largest comprehensiveness difference between two runs on their common examples (None: none)."""
    mine, old = values["comprehensiveness"].get(lead, {}), theirs["comprehensiveness"].get(lead, {})
    common = set(mine) & set(old)
    return max(abs(mine[e] - old[e]) for e in common) if common else None


def _join_missing(values: Values, theirs: Values) -> None:
    """Add to ``values`` (in place) every method of ``theirs`` it does not have, per metric."""
    for metric in values:
        for method, rows in theirs[metric].items():
            values[metric].setdefault(method, rows)


def _join_same_run(values: Values, theirs: Values, lead: str) -> None:
    """:func:`_join_missing` where ``lead``'s rows of the two runs agree on every common example to
    :data:`SAME_RUN_TOLERANCE` (the same model and examples); otherwise leave ``values`` as it is."""
    difference = _lead_difference(values, theirs, lead)
    if difference is not None and difference <= SAME_RUN_TOLERANCE:
        _join_missing(values, theirs)


def _drop_not_candidates(values: Values) -> None:
    """Remove :data:`NOT_CANDIDATES` from ``values`` (in place), so none is a half's best other."""
    for metric in values:
        for method in NOT_CANDIDATES:
            values[metric].pop(method, None)


#: a rule's losses: (loss, its s.e., tune half, metric, the best other method)
Loss = Tuple[float, float, str, str, str]


def _rule_losses(folders: Sequence[Path], ranked: Sequence[str], lead: str = FOURTH_LEAD,
                 rules: Optional[Dict[str, Dict[str, str]]] = None,
                 augment: Optional[Callable[[Cell, Path, Values], None]] = None) -> Tuple[Dict[str, List[Loss]],
                                                                                            List[Cell]]:
    """Every loss of each of ``ranked`` to the best other method, per tune half and metric, over the tune halves of
    one or more rounds (a half from the first folder that has it), each half's run joined by the fourth round's run
    of that half where both ran the default on the same model (:data:`SAME_RUN_TOLERANCE`); :data:`NOT_CANDIDATES`
    are left out. ``rules`` (default :data:`RULES`) take a candidate's rows per architecture; ``augment`` may add
    methods to a half's values (it gets the half's cell, its run folder and values) before the losses are taken."""
    rules = RULES if rules is None else rules
    losses_of: Dict[str, List[Loss]] = {}
    seen: set = set()
    runs = []
    for folder in folders:
        for run in _round_runs(folder, lead):
            if run[0].name not in seen:
                seen.add(run[0].name)
                runs.append((folder,) + run)
    for folder, cell, values, theirs, difference in runs:
        _drop_not_candidates(values)
        if theirs is not None and difference is not None and difference <= SAME_RUN_TOLERANCE:
            _join_missing(values, theirs)
        if augment is not None:
            augment(cell, folder / "tune" / cell.name, values)
        losses = cell_losses(values, sorted(values["comprehensiveness"]))
        for rule, picks in rules.items():  # the rule against every method but the one it takes; none sees the rule
            if rule in ranked and cell.architecture in picks:
                taken = picks[cell.architecture]
                ruled = {metric: {**rows, rule: rows[taken]} for metric, rows in values.items()}
                losses[rule] = cell_losses(ruled, sorted(m for m in ruled["comprehensiveness"] if m != taken))[rule]
        for method in ranked:
            for metric, loss in losses.get(method, {}).items():
                losses_of.setdefault(method, []).append((loss["loss"], loss["sem"], cell.name, metric, loss["best"]))
    return losses_of, [cell for _, cell, *_ in runs]


def _worst_row(found: List[Loss]) -> List[str]:
    """``[worst case, tune half, metric, best other, next worst]``: the next-worst loss breaks a tie."""
    ordered = sorted(found, key=lambda x: -x[0])
    w = ordered[0]
    nxt = f"{_fmt(ordered[1][0], ordered[1][1])} ({ordered[1][2]} {ordered[1][3]})" if len(ordered) > 1 else "–"
    return [_fmt(w[0], w[1]), w[2], w[3], f"`{w[4]}`", nxt]


def _worst_cases(folders: Sequence[Path], ranked: Sequence[str], lead: str = FOURTH_LEAD,
                 augment: Optional[Callable[[Cell, Path, Values], None]] = None) -> List[str]:
    """The rule's worst case of each of ``ranked`` over the tune halves of one or more rounds (see
    :func:`_rule_losses`). The next-worst loss (over the other halves and metrics) breaks a tie of the worst cases."""
    losses_of, cells = _rule_losses(folders, ranked, lead, augment=augment)
    rows = [[f"`{m}`"] + _worst_row(found) for m, found in losses_of.items()]
    halves = ", ".join(cell.name for cell in cells)
    return (["## The rule's worst case over these tune halves", "",
             f"Tune halves: {halves}. "
             "Each half's run joined by the fourth round's run of that half where the default's rows agree to "
             f"{SAME_RUN_TOLERANCE:g} (same model and examples); loss to the best other method of the half, "
             "positive = worse.", ""]
            + _table(["candidate", "worst case", "tune half", "metric", "best other", "next worst"], rows) + [""])


def _held_out_lines(folder: Path, ranked: Sequence[str], matrix_lead: str = "pr-tag-pm0.25",
                    augment: Optional[Callable[[Cell, Path, Values], None]] = None,
                    aliases: Optional[Dict[str, Any]] = None) -> List[str]:
    """A round's held-out runs: each ranked candidate against the default, and both against the committed matrix's
    LIG rows on the same examples where the run and the matrix cell come from the same model (:func:`_same_model`;
    else 'other model'), with the default's largest difference from the matrix's default (the pairing check: 0
    means the same model). ``aliases`` (:data:`ROUND_ALIASES`): another architecture's own rows for a column, and
    under ``"matrix"`` its own matrix default."""
    lead, candidates = ranked[0], [m for m in ranked[1:] if m not in RULES]
    rows = []
    for cell in CELLS.values():
        csv_path = folder / "holdout" / cell.name / "results.csv"
        if not csv_path.is_file():
            continue
        own = dict((aliases or {}).get(cell.architecture, {}))
        cell_matrix_lead = ((aliases or {}).get("matrix") or {}).get(cell.architecture, matrix_lead)
        values = _read_csv(csv_path)
        if augment is not None:
            augment(cell, csv_path.parent, values)
        matrix_csv = MATRIX_DIR / cell.name / "results.csv"
        same = matrix_csv.is_file() and _same_model(csv_path, matrix_csv)
        if same:
            _add_matrix_rows(values, _read_csv(matrix_csv), ("ig", cell_matrix_lead))
        cell_lead = own.get(lead, lead)
        mine = values["comprehensiveness"][cell_lead]
        theirs = values["comprehensiveness"].get(f"matrix:{cell_matrix_lead}", {})
        common = set(mine) & set(theirs)
        check = f"{max(abs(mine[e] - theirs[e]) for e in common):.0e}" if common else "–"
        texts = [_paired(values, own.get(m, m), cell_lead) for m in candidates] + [
            _paired(values, own.get(m, m), "matrix:ig") for m in [lead] + candidates]
        if matrix_csv.is_file() and not same:
            check = "other model"
            texts = texts[:len(candidates)] + [(0, "other model")] * (len(candidates) + 1)
        rows.append([cell.name, str(texts[0][0])] + [t or "–" for _, t in texts] + [check])
    if not rows:
        return []
    return (["## Held-out halves", ""]
            + _table(["held-out half", "n"] + [f"`{m}` − default" for m in candidates]
                     + [f"`{m}` − LIG (matrix)" for m in [lead] + candidates]
                     + ["default vs matrix (max \\|Δ comp.\\|)"], rows) + [""])


#: the matrix's long-document encoder cells (held-out halves, 256 or 512 tokens)
LONG_ENCODER_MATRIX = ("minilm--bbc-news", "minilm--movie-reviews", "mpnet--bbc-news", "mpnet--movie-reviews")


#: each encoder's default in the matrix when the eighth and ninth rounds ran (before the ninth round's gate was
#: adopted): the default those rounds' held-out long lines pair with
ROUND_MATRIX_DEFAULTS = {"minilm": "pr-tag-pm0.25", "mpnet": "pr-tag0.25-pm0.25"}
#: the rounds whose table ends with those lines (a later round's default on MPNet is the gate, so not theirs)
ROUND_LONG_HELD_OUT = ("--eighth-table", "--ninth-table")


def _long_held_out_lines() -> List[str]:
    """The matrix's long encoder cells: one walk (PR-TAG) against the model's default when the round ran
    (:data:`ROUND_MATRIX_DEFAULTS`, by depth), and both against LIG-50 and AttnLRP, paired per example."""
    rows = []
    for name in LONG_ENCODER_MATRIX:
        csv_path = MATRIX_DIR / name / "results.csv"
        if not csv_path.is_file():
            continue
        values = _read_csv(csv_path)
        default = ROUND_MATRIX_DEFAULTS[name.split("--")[0]]
        pairs = [("pr-tag", default), (default, "ig"), ("pr-tag", "ig"), (default, "attnlrp"), ("pr-tag", "attnlrp")]
        texts = [_paired(values, a, b) for a, b in pairs]
        rows.append([name, str(max(n for n, _ in texts)), f"`{default}`"] + [t or "–" for _, t in texts])
    if not rows:
        return []
    return (["## Held-out long documents (the matrix): one walk against the default", "",
             "From each cell's `results.csv` (`python benchmarks/matrix.py`); mean ± s.e. of the per-example "
             "difference, comprehensiveness: > 0 is better, sufficiency: < 0 is better.", ""]
            + _table(["cell", "n", "default", "PR-TAG (one walk) − default", "default − LIG", "PR-TAG − LIG",
                      "default − AttnLRP", "PR-TAG − AttnLRP"], rows) + [""])


#: the walks' correlation of a run, one per γ: (one walk, the two walks at λ = 0.25) of that γ
_WALK_PAIRS = {0.25: ("ds:pow0.25", "ds:pow0.25:pm0.25"), 0.5: ("ds:pow0.5", "ds:pow0.5:pm0.25")}


def write_walk_correlation(folder: Path) -> Path:
    """``<folder>/walk_correlation.csv``: per example and γ, :func:`walk_correlation` of the two walks, recovered from
    the run's cached scores of one walk ``P⁺`` and two walks ``S = P⁺ − 0.25 P⁻`` (``P⁻ = (P⁺ − S) / 0.25``), so the
    gate's picks can be read without the cache (which git does not keep)."""
    by: Dict[int, Dict[str, Any]] = {}
    with (folder / "cache.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            by.setdefault(record["example"], {})[record["method"]] = record
    rows = []
    for example in sorted(by):
        for gamma, (one, two) in _WALK_PAIRS.items():
            if one in by[example] and two in by[example]:
                positive = torch.tensor(by[example][one]["scores"], dtype=torch.float64)
                both = torch.tensor(by[example][two]["scores"], dtype=torch.float64)
                ordinary = torch.ones_like(positive, dtype=torch.bool)
                ordinary[0] = False  # an encoder explains its first token; a cached example has no padding
                rows.append((example, gamma, walk_correlation(positive, (positive - both) / 0.25, ordinary)))
    path = folder / "walk_correlation.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["example", "gamma", "correlation"])
        writer.writerows((e, g, f"{r:.6f}") for e, g, r in rows)
    return path


def _read_correlation(folder: Path, gamma: float) -> Dict[int, float]:
    path = folder / "walk_correlation.csv"
    if not path.is_file():
        return {}
    with path.open(newline="", encoding="utf-8") as fh:
        return {int(r["example"]): float(r["correlation"]) for r in csv.DictReader(fh) if float(r["gamma"]) == gamma}


def _gated(values: Values, correlation: Dict[int, float], threshold: float, gamma: float = 0.25) -> Values:
    """The gate at ``threshold`` read from a run's rows: per example, one walk's metrics where the walks correlate
    above it, else the two walks' (the gate computes nothing else, so its metrics are the picked method's)."""
    one, two = _WALK_PAIRS[gamma]
    out: Values = {}
    for metric, rows in values.items():
        a, b = rows.get(one, {}), rows.get(two, {})
        common = sorted(set(a) & set(b) & set(correlation))
        out[metric] = {e: (a[e] if correlation[e] > threshold else b[e]) for e in common}
    return out


def _gate_picks(run: Path, values: Values, threshold: float,
                gamma: float = 0.25) -> Optional[Tuple[Values, Dict[int, float]]]:
    """The gate's rows at ``threshold`` in a run (:func:`_gated` on its ``walk_correlation.csv`` at ``gamma``) and
    the correlations they were picked by; None where the run has no correlations."""
    correlation = _read_correlation(run, gamma)
    return (_gated(values, correlation, threshold, gamma), correlation) if correlation else None


#: the gate's thresholds scanned on the tune halves (−1: one walk on every example; 1: two walks on every example)
GATE_THRESHOLDS = (-1.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)


def _add_gate_rows(cell: Cell, run: Path, values: Values) -> None:
    """A 12-layer run's rows of the chosen gate (:data:`GATED`) where it did not run: read from its one walk, two
    walks and ``walk_correlation.csv`` (:func:`_gated`), which :func:`_gate_check_lines` checks against the runs
    where it ran."""
    if cell.architecture != "mpnet":
        return
    for name in GATED:
        found = None if name in values["comprehensiveness"] else _gate_picks(run, values, GATE[name])
        if found is not None:
            for metric, rows in found[0].items():
                values[metric][name] = rows


def _picks_gap(values: Values, method: str, picked: Values) -> Tuple[List[int], float]:
    """The examples ``method``'s rows in ``values`` share with ``picked``, and the largest difference of the two over
    them and both metrics (0: ``method`` computes the picks)."""
    common = sorted(set(picked["comprehensiveness"]) & set(values["comprehensiveness"][method]))
    gap = max((abs(values[m][method][e] - picked[m][e]) for m in picked for e in common), default=0.0)
    return common, gap


def _gate_check_lines(folder: Path) -> List[str]:
    """Where the gate ran as a method, its largest difference from the picked method's rows (0: the gate computes
    nothing else, so the rows read from a half's one walk and two walks are the gate's)."""
    rows = []
    for half in ("tune", "holdout"):
        for cell in CELLS.values():
            path = folder / half / cell.name
            if not (path / "results.csv").is_file():
                continue
            values = _read_csv(path / "results.csv")
            for name in GATED:
                found = _gate_picks(path, values, GATE[name]) if name in values["comprehensiveness"] else None
                if found is not None:
                    common, gap = _picks_gap(values, name, found[0])
                    rows.append([f"{half}/{cell.name}", f"`{name}`", str(len(common)), f"{gap:.0e}"])
    if not rows:
        return []
    return (["## The gate run as a method against its picks", "",
             "Largest difference, over examples and both metrics, between the gate's own rows and the rows of the "
             "walk its correlation picks; elsewhere the gate's rows are those picks.", ""]
            + _table(["run", "gate", "n", "max \\|Δ\\|"], rows) + [""])


#: the library's preset of the gate (``walk_gate=0.5`` in the core), the matrix's default of 12-layer encoders
LIBRARY_GATE = ("pr-tag0.25-pm0.25-gate0.5", "ds:pow0.25:pm0.25:gate0.5")


def _library_gate_lines(folder: Path) -> List[str]:
    """The core's gate (:data:`LIBRARY_GATE`, run in the matrix) against this round's picks on the same held-out
    examples: how many examples the round's correlations send to one walk, and the largest difference of the rows
    (0: the core computes the picks)."""
    library, name = LIBRARY_GATE
    rows = []
    for cell in CELLS.values():
        run, matrix_csv = folder / "holdout" / cell.name, MATRIX_DIR / cell.name / "results.csv"
        if not (run / "results.csv").is_file() or not matrix_csv.is_file():
            continue
        found = _gate_picks(run, _read_csv(run / "results.csv"), GATE[name])
        matrix = _read_csv(matrix_csv)
        if found is None or library not in matrix["comprehensiveness"]:
            continue
        common, gap = _picks_gap(matrix, library, found[0])
        if not common:
            continue
        one = sum(found[1][e] > GATE[name] for e in common)
        rows.append([cell.name, str(len(common)), f"{one} of {len(common)}", f"{gap:.0e}"])
    if not rows:
        return []
    return (["## The library's gate in the matrix against the picks", "",
             f"`{library}` (`walk_gate=0.5` in `GraphSpec`, one pass: both walks and the gate on the same graph) in "
             "each matrix cell's `results.csv`, against this round's picks on the same held-out examples (one walk "
             "where `walk_correlation.csv` is above 0.5, else the two walks). Largest difference over examples and "
             "both metrics.", ""]
            + _table(["held-out half", "n", "one walk picked", "max \\|Δ\\|"], rows) + [""])


def _gate_scan_lines(folders: Sequence[Path], thresholds: Sequence[float] = GATE_THRESHOLDS) -> List[str]:
    """The threshold of the 12-layer gate chosen by the rule: for each threshold, the depth rule with the gate on
    MPNet (its rows read from each MPNet half's one walk, two walks and ``walk_correlation.csv``, :func:`_gated`)
    and the default's two walks on MiniLM, its worst case over the tune halves of ``folders``."""
    rows = []
    for threshold in thresholds:
        gate, rule = f"gate@{threshold:g}", f"rule:depth-gate@{threshold:g}"
        picked: List[bool] = []

        def augment(cell: Cell, run: Path, values: Values, gate: str = gate, threshold: float = threshold) -> None:
            if cell.architecture != "mpnet":
                return
            found = _gate_picks(run, values, threshold)
            if found is None:
                raise SystemExit(f"{run} has no walk_correlation.csv: run --walk-correlation on it first")
            rows_, correlation = found
            for metric in rows_:
                values[metric][gate] = rows_[metric]
            picked.extend(correlation[e] > threshold for e in values["comprehensiveness"][gate])

        losses_of, _ = _rule_losses(folders, [rule], FOURTH_LEAD, {rule: {"minilm": FOURTH_LEAD, "mpnet": gate}},
                                    augment)
        share = f"{sum(picked) / len(picked):.2f}" if picked else "–"
        rows.append([f"{threshold:g}", share] + _worst_row(losses_of[rule]))
    return (["## The gate's threshold, by the rule", "",
             "The depth rule with the gate on the 12-layer encoder: one walk where the two walks' scores correlate "
             "above the threshold over the real tokens other than the explained one, else the default's two walks "
             "(−1: one walk everywhere; 1: the default). The gate's rows are the picked method's rows; "
             "`walk_correlation.csv` in each MPNet half (`--walk-correlation`) has the correlations. Worst case over the same tune halves as above.", ""]
            + _table(["threshold", "MPNet examples on one walk", "worst case", "tune half", "metric", "best other",
                      "next worst"], rows) + [""])


def _tenth_gate_lines(folders: Sequence[Path], folder: Path) -> List[str]:
    """The tenth round's gate on the 6-layer encoder's tune halves: how many examples it kept on one walk (their
    two walks' scores correlate above the threshold, ``walk_correlation.csv`` at γ = 0.5), and its largest
    difference from those picks (0: the library's gate computes the picks and nothing else)."""
    rows = []
    for cell in CELLS.values():
        path = folder / "tune" / cell.name
        if cell.architecture != "minilm" or not (path / "results.csv").is_file():
            continue
        values = _read_csv(path / "results.csv")
        found = _gate_picks(path, values, GATE[TENTH_GATE], 0.5) if TENTH_GATE in values["comprehensiveness"] else None
        if found is None:
            continue
        picked, correlation = found
        common, gap = _picks_gap(values, TENTH_GATE, picked)
        one = sum(correlation[e] > GATE[TENTH_GATE] for e in common)
        rows.append([cell.name, str(len(common)), f"{one} of {len(common)}", f"{gap:.0e}"])
    return (["## The gate's picks on the 6-layer encoder", "",
             f"`{TENTH_GATE}` on each MiniLM tune half: the examples whose two walks' scores correlate above "
             f"{GATE[TENTH_GATE]:g} (`walk_correlation.csv`, `--walk-correlation`) keep one walk (`ds:pow0.5`, "
             "PR-TAG); largest difference, over examples and both metrics, between the gate's own rows and those "
             "picks.", ""]
            + _table(["tune half", "n", "one walk picked", "max \\|Δ\\|"], rows) + [""])


#: the earlier rounds whose tune runs the eleventh round's halves are joined with, and the rows that must agree
ELEVENTH_JOINS = (TENTH_DIR, NINTH_DIR, EIGHTH_DIR)
_JOIN_LEADS = {"minilm": FOURTH_LEAD, "mpnet": "ds:pow0.25:pm0.25"}


def _add_earlier_rows(cell: Cell, run: Path, values: Values) -> None:
    """An eleventh-round half's values joined with the earlier rounds' runs of the same half (:data:`ELEVENTH_JOINS`)
    where the architecture's two walks agree on every common example to :data:`SAME_RUN_TOLERANCE` (the same model
    and examples), so that every construction measured on the half is a possible best other; then the gate's rows
    where it did not run (:func:`_add_gate_rows`)."""
    lead = _JOIN_LEADS.get(cell.architecture)
    if lead is not None and run.parent.name == "tune":
        _join_tune_runs(cell, run, values, ELEVENTH_JOINS, lead)
    _add_gate_rows(cell, run, values)


def _join_tune_runs(cell: Cell, run: Path, values: Values, folders: Sequence[Path], lead: str) -> None:
    """``values`` joined (:func:`_join_same_run`) with each of ``folders``' runs of ``cell``'s tune half other than
    ``run`` itself, where ``lead`` agrees on every common example."""
    for folder in folders:
        path = folder / "tune" / cell.name / "results.csv"
        if path.is_file() and path.parent.resolve() != run.resolve():
            _join_same_run(values, _read_csv(path), lead)


#: a round whose table pairs another architecture's halves with that architecture's own default and constructions:
#: flag -> {architecture: {column's method: the method whose rows the architecture's halves show}, "values": the
#: methods that only stand in for a column (not columns themselves)}
ROUND_ALIASES: Dict[str, Dict[str, Any]] = {
    "--eleventh-table": {"minilm": {GATED[0]: FOURTH_LEAD, ELEVENTH_HUBS[0]: ELEVENTH_MINILM[0],
                                    ELEVENTH_HUBS[1]: ELEVENTH_MINILM[1]},
                         "values": tuple(ELEVENTH_MINILM), "matrix": {"minilm": "pr-tag-pm0.25"}},
    "--thirteenth-table": {"minilm": dict(zip(THIRTEENTH_MPNET, THIRTEENTH_MINILM)), "values": tuple(THIRTEENTH_MINILM),
                           "matrix": {"minilm": "pr-tag-pm0.25-hubs0.5"}},
    "--fifteenth-table": {"minilm": {THIRTEENTH_MPNET[1]: THIRTEENTH_MINILM[1], FIFTEENTH_NEW[-1]: FIFTEENTH_MINILM[0]},
                          "values": tuple(FIFTEENTH_MINILM), "matrix": {"minilm": "pr-tag-pm0.25-hubs0.5-lp"}},
    "--sixteenth-table": {"minilm": {THIRTEENTH_MPNET[1]: THIRTEENTH_MINILM[1],
                                     **dict(zip(SIXTEENTH_NEW, SIXTEENTH_MINILM))},
                          "values": tuple(SIXTEENTH_MINILM), "matrix": {"minilm": "pr-tag-pm0.25-hubs0.5-lp"}},
    "--seventeenth-table": {"minilm": {THIRTEENTH_MPNET[1]: THIRTEENTH_MINILM[1],
                                       **dict(zip(SEVENTEENTH_NEW, SEVENTEENTH_MINILM))},
                            "values": tuple(SEVENTEENTH_MINILM), "matrix": {"minilm": "pr-tag-pm0.25-hubs0.5-lp"}}}


#: each architecture's default with the hubs' weight (eleventh round): the rows that pair a later run of a half with
#: the eleventh round's run of it
_HUBS_LEADS = {"minilm": ELEVENTH_MINILM[0], "mpnet": ELEVENTH_HUBS[0]}


def _add_eleventh_rows(cell: Cell, run: Path, values: Values) -> None:
    """A later tune half's values joined with the eleventh round's values of the same half, built as the eleventh
    round's worst case builds them (its run, the fourth round's run where they agree, :func:`_add_earlier_rows`),
    where the architecture's default (:data:`_HUBS_LEADS`) agrees on every common example to
    :data:`SAME_RUN_TOLERANCE`; :data:`NOT_CANDIDATES` stay out. Held-out runs are left as they are."""
    path = ELEVENTH_DIR / "tune" / cell.name / "results.csv"
    if run.parent.name != "tune" or not path.is_file() or cell.architecture not in _HUBS_LEADS:
        return
    theirs = _read_csv(path)
    fourth = FOURTH_DIR / "tune" / cell.name / "results.csv"
    if fourth.is_file():
        _join_same_run(theirs, _read_csv(fourth), FOURTH_LEAD)
    _add_earlier_rows(cell, path.parent, theirs)
    _join_same_run(values, theirs, _HUBS_LEADS[cell.architecture])
    _drop_not_candidates(values)


#: each encoder architecture's default on the class's log-probability (thirteenth round): the rows that pair a later
#: run of a half with the thirteenth, fifteenth and sixteenth rounds' runs of it
_LP_LEADS = {"minilm": THIRTEENTH_MINILM[1], "mpnet": THIRTEENTH_MPNET[1]}


def _add_log_probability_rows(cell: Cell, run: Path, values: Values) -> None:
    """A later encoder tune half's values joined with the thirteenth round's values of the same half (built as that
    round's worst case builds them, :func:`_add_eleventh_rows`, so with the earlier rounds' too) and the fifteenth's
    and sixteenth's, each where the architecture's default on the log-probability (:data:`_LP_LEADS`) agrees on every
    common example to :data:`SAME_RUN_TOLERANCE`, so every construction measured on the half is a possible best
    other; :data:`NOT_CANDIDATES` stay out. Held-out runs are left as they are."""
    if run.parent.name != "tune" or cell.architecture not in _LP_LEADS:
        return
    for folder in (THIRTEENTH_DIR, FIFTEENTH_DIR, SIXTEENTH_DIR):
        path = folder / "tune" / cell.name / "results.csv"
        if path.is_file():
            theirs = _read_csv(path)
            if folder == THIRTEENTH_DIR:
                _add_eleventh_rows(cell, path.parent, theirs)
            _join_same_run(values, theirs, _LP_LEADS[cell.architecture])
    _drop_not_candidates(values)


def _add_decoder_rows(cell: Cell, run: Path, values: Values) -> None:
    """A decoder tune half's values joined with every earlier decoder round's run of the same half
    (:data:`DECODER_JOINS`) where the decoders' default (PR-TAG±, ``ds:pow0.5:pm``) agrees on every common example to
    :data:`SAME_RUN_TOLERANCE` (the same model and examples), so that every construction measured on the half is a
    possible best other; :data:`NOT_CANDIDATES` stay out. Held-out runs and encoder halves are left as they are."""
    if run.parent.name != "tune" or cell.architecture not in DECODERS:
        return
    _join_tune_runs(cell, run, values, DECODER_JOINS, THIRTEENTH_DECODERS[0])
    _drop_not_candidates(values)


#: rows a round's halves take before its tables: flag -> augment (see :func:`_rule_losses`)
ROUND_AUGMENT: Dict[str, Callable[[Cell, Path, Values], None]] = {"--ninth-table": _add_gate_rows,
                                                                  "--tenth-table": _add_gate_rows,
                                                                  "--eleventh-table": _add_earlier_rows,
                                                                  "--thirteenth-table": _add_eleventh_rows,
                                                                  "--fourteenth-table": _add_decoder_rows,
                                                                  "--seventeenth-table": _add_log_probability_rows}


def _thirteenth_decoder_lines(folders: Sequence[Path], folder: Path) -> List[str]:
    """The decoders' halves of the thirteenth round (``thirteenth-decoders/<half>/<cell>``): PR-TAG± on the class's
    log-probability against PR-TAG± on its logit (:data:`THIRTEENTH_DECODERS`), paired per example."""
    rows = []
    for half in ("tune", "holdout"):
        for cell in CELLS.values():
            path = THIRTEENTH_DECODERS_DIR / half / cell.name / "results.csv"
            if path.is_file():
                n, text = _paired(_read_csv(path), THIRTEENTH_DECODERS[1], THIRTEENTH_DECODERS[0])
                rows.append([f"{cell.name} ({half})", str(n), text or "–"])
    if not rows:
        return []
    return (["## Decoders (not ranked above)", "",
             f"`{THIRTEENTH_DECODERS[1]}` − `{THIRTEENTH_DECODERS[0]}` (the decoders' default, PR-TAG±, on the "
             "class's log-probability against on its logit), comprehensiveness ↑ / sufficiency ↓; "
             "the commands are in each folder's `COMMAND`.", ""]
            + _table(["half", "n", "log-probability − default"], rows) + [""])


def _fourteenth_held_out_lines(folders: Sequence[Path], folder: Path) -> List[str]:
    """The decoders' held-out halves of the fourteenth round: the matrix's decoder cells (their models and examples),
    to which PR-TAG± on the class's log-probability was added (``matrix.py --add pr-tag-pm-lp``), against PR-TAG± on
    the logit and both against LIG-50, paired per example."""
    rows = []
    for path in sorted(p for arch in sorted(DECODERS) for p in MATRIX_DIR.glob(f"{arch}--*/results.csv")):
        values = _read_csv(path)
        if "pr-tag-pm-lp" not in values["comprehensiveness"]:
            continue
        n, text = _paired(values, "pr-tag-pm-lp", "pr-tag-pm")
        rows.append([path.parent.name, str(n), text] + [_paired(values, m, "ig")[1] or "–"
                                                         for m in ("pr-tag-pm", "pr-tag-pm-lp")])
    if not rows:
        return []
    return (["## Held-out halves: the matrix's decoder cells", "",
             "`pr-tag-pm-lp` (PR-TAG± on the class's log-probability) and `pr-tag-pm` (PR-TAG±, on the logit) as the "
             "matrix computed them on its held-out examples and models (`benchmarks/results/matrix/<cell>/"
             "results.csv`), comprehensiveness ↑ / sufficiency ↓.", ""]
            + _table(["held-out cell", "n", "log-probability − PR-TAG±", "PR-TAG± − LIG", "log-probability − LIG"],
                     rows) + [""])


#: sections a round's table adds after its worst case: flag -> lines, given the round's worst-case folders and folder
ROUND_SECTIONS: Dict[str, Callable[[Sequence[Path], Path], List[str]]] = {
    "--ninth-table": lambda folders, folder: (_gate_scan_lines(folders) + _gate_check_lines(folder)
                                              + _library_gate_lines(folder)),
    "--tenth-table": _tenth_gate_lines,
    "--thirteenth-table": _thirteenth_decoder_lines,
    "--fourteenth-table": _fourteenth_held_out_lines}


#: rounds whose table has a row per construction and, per half, the two metrics and the bins where LIG's lead sits
#: (comprehensiveness at 50% removed, sufficiency at 1% kept): flag -> those bins
ROUND_BINS: Dict[str, Tuple[str, ...]] = {"--twelfth-table": ("comprehensiveness@50", "sufficiency@1"),
                                          "--fifteenth-table": ("comprehensiveness@50", "sufficiency@1"),
                                          "--sixteenth-table": ("comprehensiveness@50", "sufficiency@1"),
                                          "--sixteenth-decoders-table": ("comprehensiveness@50", "sufficiency@1"),
                                          "--seventeenth-table": ("comprehensiveness@50", "sufficiency@1"),
                                          "--seventeenth-decoders-table": ("comprehensiveness@50", "sufficiency@1")}


def _by_construction_lines(flag: str, folder: Path, lead: str, others: Sequence[str],
                           aliases: Optional[Dict[str, Any]] = None) -> List[str]:
    """A row per construction: on each tune half, construction − the default on both metrics, then on each bin of
    :data:`ROUND_BINS` (paired over the half's common examples); on a half of an architecture in ``aliases``
    (:data:`ROUND_ALIASES`) the default and each construction are that architecture's own rows."""
    bins = ROUND_BINS[flag]
    halves = [(cell, folder / "tune" / cell.name / "results.csv") for cell in CELLS.values()
              if (folder / "tune" / cell.name / "results.csv").is_file()]
    read = [(dict((aliases or {}).get(cell.architecture, {})), cell, _read_csv(path), _read_csv(path, bins))
            for cell, path in halves]
    header = ["construction"] + [
        f"{cell.name} (n={len(set(values['comprehensiveness'].get(own.get(lead, lead), {}))):d})"
        for own, cell, values, _ in read]
    header += [f"{cell.name} {b.replace('comprehensiveness', 'comp.').replace('sufficiency', 'suff.')}%"
               for _, cell, _, _ in read for b in bins]
    rows = []
    for m in others:
        row = ["LIG-50" if m == "ig" else f"`{m}`"]
        row += [_paired(values, own.get(m, m), own.get(lead, lead))[1] or "–" for own, _, values, _ in read]
        for own, _, _, binned in read:
            row += [_paired(binned, own.get(m, m), own.get(lead, lead), [b])[1] or "–" for b in bins]
        rows.append(row)
    note = ("Construction − the default, comprehensiveness ↑ / sufficiency ↓; the bin columns are the same "
            "difference at one bin (comp.@50: half the tokens removed, most important first; suff.@1: the top 1% "
            "kept).")
    return _table(header, rows) + ["", note]


def _round_table(flag: str, path: Optional[Path] = None) -> Path:
    """``results/default-search/<round>.md``: a round's constructions against the default (``ds:pow0.5:pm0.25``, or
    the round's own in :data:`ROUND_LEADS`, rerun in the same process) on the tune halves; the pairing check is the
    default's largest difference from its fourth-round run on the same examples."""
    folder, methods, title, name, ranked = ROUNDS[flag]
    lead, matrix_lead, what = ROUND_LEADS.get(flag, _ENCODER_LEAD)
    lines = [f"# {title}", "",
             f"`python benchmarks/default_search.py {flag}`. Mean ± s.e. of the per-example difference "
             f"method − the default (`{lead}`: {what}); comprehensiveness: "
             "> 0 is better, sufficiency: < 0 is better. Each run's command is in its folder's `COMMAND`.", ""]
    others = [m for m in methods if m != lead and m not in ROUND_ALIASES.get(flag, {}).get("values", ())]
    augment = ROUND_AUGMENT.get(flag)
    aliases = ROUND_ALIASES.get(flag, {})
    for architecture, own in aliases.items():
        if architecture not in ("values", "matrix"):
            lines += [f"On the {architecture} halves a column shows that architecture's own rows: "
                      + "; ".join(f"`{own[m]}` for `{m}`" for m in own) + ".", ""]
    if flag in ROUND_BINS:
        path = path or RESULTS / name
        held_out = (_held_out_lines(folder, ROUND_HOLDOUT[flag], matrix_lead, aliases=aliases)
                    if flag in ROUND_HOLDOUT else [])
        worst = (_worst_cases(ROUND_WORST_FOLDERS[flag], ranked, FOURTH_LEAD, augment) + [ROUND_NOTES.get(flag, "")]
                 if ranked and flag in ROUND_WORST_FOLDERS else [])
        path.write_text("\n".join(lines + _by_construction_lines(flag, folder, lead, others, aliases) + [""]
                                  + worst + held_out),
                        encoding="utf-8")
        return path
    rows = []
    for cell, values, _, difference in _round_runs(folder, lead):
        if augment is not None:
            augment(cell, folder / "tune" / cell.name, values)
        check = "–" if difference is None else f"{difference:.0e}"
        own = aliases.get(cell.architecture, {})  # this architecture's rows for a column, and its default
        texts = [_paired(values, own.get(m, m), own.get(lead, lead)) for m in others]
        rows.append([cell.name, str(max(n for n, _ in texts))] + [t for _, t in texts] + [check])
    lines += _table(["tune half", "n"] + [f"`{m}` − default" if m != "ig" else "LIG-50 − default" for m in others]
                    + ["default vs fourth round (max \\|Δ comp.\\|)"], rows) + [""]
    if ranked and flag in ROUND_WORST_FOLDERS:
        # over several rounds' halves: the join with the fourth round goes by the default every encoder round ran
        lines += _worst_cases(ROUND_WORST_FOLDERS[flag], ranked, FOURTH_LEAD, augment)
        if flag in ROUND_SECTIONS:
            lines += ROUND_SECTIONS[flag](ROUND_WORST_FOLDERS[flag], folder)
        lines += [ROUND_NOTES[flag], ""] if flag in ROUND_NOTES else []
        lines += _long_held_out_lines() if flag in ROUND_LONG_HELD_OUT else []
        lines += _held_out_lines(folder, ROUND_HOLDOUT.get(flag, ranked), matrix_lead, augment,
                                 ROUND_ALIASES.get(flag))
    elif ranked:
        lines += _worst_cases([folder], ranked, lead) + _held_out_lines(folder, ranked, matrix_lead)
    path = path or RESULTS / name
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _mean_sem(xs: Sequence[float]) -> Tuple[float, float]:
    from captum_prxai.metrics.stats import mean_sem

    return mean_sem(list(xs))


def _common(values: Dict[str, Dict[int, float]]) -> List[int]:
    """Examples every method of the run explained (the comparison is paired)."""
    sets = [set(v) for v in values.values()]
    return sorted(set.intersection(*sets)) if sets else []


def cell_losses(values: Dict[str, Dict[str, Dict[int, float]]], methods: Sequence[str],
                control: str = "random") -> Dict[str, Dict[str, Dict[str, Any]]]:
    """``{method: {metric: {"loss", "sem", "n", "best"}}}``: paired loss to the best other method.

    ``loss`` is the mean per-example difference best-other minus method for
    comprehensiveness and method minus best-other for sufficiency, so a
    positive loss means the method is worse; the best other method is the one
    with the best mean among all but ``method`` and the control.
    """
    out: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for metric, higher in METRICS:
        table = {m: values[metric][m] for m in methods if m in values[metric]}
        common = _common(table)
        means = {m: sum(table[m][e] for e in common) / len(common) for m in table}
        for m in table:
            if m == control:
                continue
            others = [o for o in table if o not in (m, control)]
            if not others:
                continue
            best = (max if higher else min)(others, key=lambda o: means[o])
            sign = 1.0 if higher else -1.0
            diffs = [sign * (table[best][e] - table[m][e]) for e in common]
            loss, sem = _mean_sem(diffs)
            out.setdefault(m, {})[metric] = {"loss": loss, "sem": sem, "n": len(common), "best": best}
    return out


def _finished(half: str) -> List[Tuple[Cell, Path]]:
    return [(c, out_dir(c, half) / "results.csv") for c in CELLS.values()
            if (out_dir(c, half) / "results.csv").is_file()]


def _fmt(mean: float, sem: float, digits: int = 3) -> str:
    text = f"{mean:+.{digits}f}" if not math.isnan(mean) else "n/a"
    return text if math.isnan(sem) else f"{text} ± {sem:.{digits}f}"


#: labels of methods whose scores were computed elsewhere (not in this process's registry)
_OTHER_LABELS = {"attnlrp": "AttnLRP (lxt)"}


def _label(name: str) -> str:
    from captum_prxai.bench.methods import METHODS

    if name.startswith("matrix:"):
        return f"{_OTHER_LABELS.get(name[7:]) or _label(name[7:])} (matrix)"
    spec = METHODS.get(name)
    return spec.label if spec is not None else name


def _table(header: List[str], rows: List[List[str]]) -> List[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


#: references every method is also compared with directly
REFERENCE_PAIRS = ("ds:g", "ds:ag", "matrix:pr-ag", "gae", "matrix:gae", "ig", "matrix:ig", "matrix:attnlrp", "matrix:lime", "matrix:kernel-shap")


#: methods of the committed matrix (benchmarks/results/matrix/<cell>/results.csv, the same held-out halves and
#: the same seeded sample order, so its first n examples are this run's n) paired with the held-out runs here
MATRIX_METHODS = ("pr-g", "pr-ag", "gae", "ig", "attnlrp", "kernel-shap", "lime")
#: matrix methods left out when this run has its own (the same construction)
_SAME = {"pr-g": "ds:g", "pr-ag": "ds:ag", "gae": "gae"}
MATRIX_DIR = RESULTS.parent / "matrix"


def _merge_matrix(cell: Cell, values: Dict[str, Dict[str, Dict[int, float]]],
                  run_csv: Path) -> Optional[Dict[str, float]]:
    """Add the matrix's MATRIX_METHODS (as ``matrix:<name>``) on the examples of this run (``run_csv``); check the
    pairing.

    Only short cells (the matrix ran the long ones at another length), and only where the run and the matrix cell
    come from the same model (:func:`_same_model`): a cell rerun later on a retrained model would otherwise be paired
    with a run of the former one. Returns the largest per-example difference between this run's ``ds:g`` and
    ``ds:ag`` and the matrix's ``pr-g`` and ``pr-ag`` (the same constructions at the matrix's time): near 0 when the
    examples, model and code agree.
    """
    path = MATRIX_DIR / cell.name / "results.csv"
    if cell.max_length is not None or not path.is_file() or not _same_model(run_csv, path):
        return None
    matrix = _read_csv(path)
    mine = set().union(*(set(rows) for rows in values["comprehensiveness"].values()))  # this run's examples
    check: Dict[str, float] = {}
    for ours, theirs in (("ds:g", "pr-g"), ("ds:ag", "pr-ag")):
        for metric, _ in METRICS:
            a, b = values[metric].get(ours, {}), matrix[metric].get(theirs, {})
            common = set(a) & set(b)
            if common:
                check[f"{ours} vs matrix {theirs} {metric}"] = max(abs(a[e] - b[e]) for e in common)
    _add_matrix_rows(values, matrix, [m for m in MATRIX_METHODS if _SAME.get(m) not in values["comprehensiveness"]],
                     examples=mine)
    return check


def half_tables(half: str, folders: Optional[List[Tuple[Cell, Path]]] = None) -> Tuple[List[str], Dict[str, Any]]:
    """Markdown tables of one half (means per cell and method; paired losses; worst cases).

    ``folders``: ``(cell, results.csv)`` pairs to tabulate instead of the half's finished cells.
    """
    register_candidates()
    runs = []
    checks: Dict[str, Dict[str, float]] = {}
    for cell, path in (_finished(half) if folders is None else folders):
        values = _read_csv(path)
        if half == "holdout":
            check = _merge_matrix(cell, values, path)
            if check:
                checks[cell.name] = check
        methods = list(values["comprehensiveness"])
        meta = json.loads((path.parent / "summary.json").read_text())["meta"]
        runs.append((cell, values, methods, cell_losses(values, methods), meta))
    lines: List[str] = []
    data: Dict[str, Any] = {"cells": {}, "worst": {}}
    if not runs:
        return ["(no finished cell)"], data
    everyone = list(dict.fromkeys(m for _, _, methods, _, _ in runs for m in methods))
    for metric, higher in METRICS:
        lines += [f"### {metric.capitalize()} {'↑' if higher else '↓'} (mean ± s.e. over the cell's examples)", ""]
        rows = []
        for m in everyone:
            row = [_label(m)]
            for cell, values, methods, _, _ in runs:
                table = {k: values[metric][k] for k in methods}
                common = _common(table)
                row.append(_fmt(*_mean_sem([values[metric][m][e] for e in common])) if m in values[metric] else "")
            rows.append(row)
        header = ["Method"] + [f"{c.name} (n={len(_common(v[metric]))})" for c, v, _, _, _ in runs]
        lines += _table(header, rows) + [""]
    lines += ["### Paired loss to the best other method of the cell (positive = worse; mean ± paired s.e.)", "",
              "Comp. loss = best other − method; Suff. loss = method − best other (both in probability units). "
              "The worst case is the largest loss over the cells and both metrics; `>1 s.e.` counts the "
              "(cell, metric) pairs where the loss exceeds one paired standard error.", ""]
    rows = []
    worst: Dict[str, Dict[str, Any]] = {}
    for m in everyone:
        if m == "random":
            continue
        row = [_label(m)]
        losses = []
        for cell, _, _, per, _ in runs:
            for metric, _ in METRICS:
                stat = per.get(m, {}).get(metric)
                if stat is None:
                    row.append("")
                    continue
                row.append(_fmt(stat["loss"], stat["sem"]) + ("" if stat["loss"] <= 0 else f" ({_label(stat['best'])})"))
                losses.append((stat["loss"], stat["sem"], cell.name, metric))
        if losses:
            top = max(losses, key=lambda x: x[0])
            beyond = sum(1 for loss, sem, _, _ in losses if loss > (0 if math.isnan(sem) else sem))
            worst[m] = {"loss": top[0], "sem": top[1], "cell": top[2], "metric": top[3], "beyond_1se": beyond,
                        "pairs": len(losses), "cells": len(losses) // 2,
                        "mean_loss": sum(x[0] for x in losses) / len(losses)}
            row += [f"{top[0]:+.3f} ({top[2]}, {top[3][:4]}.)", f"{beyond}/{len(losses)}"]
        rows.append(row)
    header = ["Method"] + [f"{c.name} {m[:4]}." for c, _, _, _, _ in runs for m, _ in METRICS] + ["Worst case", ">1 s.e."]
    lines += _table(header, rows) + [""]
    for ref in REFERENCE_PAIRS:
        if not any(ref in methods for _, _, methods, _, _ in runs):
            continue
        lines += [f"### Paired difference to {_label(ref)} (method − {_label(ref)}; mean ± paired s.e.)", "",
                  "Comp.: positive = the method removes more of the prediction (better); Suff.: negative = "
                  "the method's top tokens alone keep more of it (better).", ""]
        rows = []
        for m in everyone:
            if m in ("random", ref):
                continue
            row = [_label(m)]
            for _, values, methods, _, _ in runs:
                for metric, _ in METRICS:
                    a, b = values[metric].get(m), values[metric].get(ref)
                    if a is None or b is None:
                        row.append("")
                        continue
                    common = sorted(set(a) & set(b))
                    row.append(_fmt(*_mean_sem([a[e] - b[e] for e in common])))
            rows.append(row)
        header = ["Method"] + [f"{c.name} {m[:4]}." for c, _, _, _, _ in runs for m, _ in METRICS]
        lines += _table(header, rows) + [""]
    ranked = sorted((m for m in worst if m.startswith("ds:")),
                    key=lambda m: (worst[m]["cells"] < len(runs), worst[m]["loss"], worst[m]["mean_loss"]))
    if ranked:
        lines += ["### Candidates ranked by worst-case loss (smallest first; only those run on every cell rank)", ""]
        rows = [[_label(m), f"{worst[m]['loss']:+.3f} ± {worst[m]['sem']:.3f}", worst[m]["cell"], worst[m]["metric"],
                 f"{worst[m]['mean_loss']:+.3f}", f"{worst[m]['beyond_1se']}/{worst[m]['pairs']}",
                 str(worst[m]["cells"])] for m in ranked]
        lines += _table(["Candidate", "Worst-case loss", "Cell", "Metric", "Mean loss", ">1 s.e.", "Cells"], rows)
        lines.append("")
    if checks:
        lines += ["### Pairing check with the matrix (largest per-example |difference|, same construction)", "",
                  "Methods named `matrix:<name>` are the committed matrix's per-example results on the same "
                  "held-out examples; this run's `ds:g`/`ds:ag` against the matrix's PR-G/PR-AG (the same "
                  "settings) shows whether examples, model weights and code agree.", ""]
        lines += _table(["Cell", "Comparison", "largest abs. difference"],
                        [[c, k, f"{v:.2e}"] for c, check in checks.items() for k, v in check.items()]) + [""]
    for cell, _, methods, per, meta in runs:
        data["cells"][cell.name] = {"meta": meta, "methods": methods, "losses": per}
    data["matrix_checks"] = checks
    data["worst"] = worst
    data["ranked"] = ranked
    return lines, data


#: thresholds (real tokens) of the length rule: the two-way walk on inputs of at most this many tokens, else one
LENGTH_THRESHOLDS = (16, 32, 48, 64, 96, 128, 192, 256)
#: the encoder cells: the length rule is for encoders (decoders take the two-way walk at every length)
ENCODER_TUNE = ("minilm--movie-sentences", "minilm--uncertainty", "minilm--bbc-news", "minilm--spam", "mpnet--tweets")
ENCODER_MATRIX = ("minilm--movie-sentences", "minilm--tweets", "minilm--uncertainty", "minilm--bbc-news",
                  "mpnet--movie-sentences", "mpnet--tweets", "mpnet--uncertainty", "mpnet--movie-reviews")


def _tokens(path: Path) -> Dict[int, int]:
    with path.open(newline="", encoding="utf-8") as fh:
        return {int(row["example"]): int(row["n_tokens"]) for row in csv.DictReader(fh)}


def _add_length_rule(values: Dict[str, Dict[str, Dict[int, float]]], tokens: Dict[int, int], threshold: int,
                     two_way: str, one_way: str, name: str) -> None:
    """Add ``name``: per example, ``two_way``'s value on inputs of at most ``threshold`` tokens, else ``one_way``'s."""
    for metric, _ in METRICS:
        a, b = values[metric][two_way], values[metric][one_way]
        values[metric][name] = {e: (a[e] if tokens[e] <= threshold else b[e]) for e in a if e in b}


def write_length_rule_table(path: Optional[Path] = None) -> Path:
    """``results/default-search/length-rule.md``: the two-way walk on short encoder inputs, one walk on long ones.

    Tune halves: the rule's worst case (the default search's rule) at each threshold, beside PR-TAG's and the
    two-way walk's. Held-out halves (the matrix): the rule at the chosen threshold, paired against PR-TAG, GAE,
    LIG and AttnLRP, computed from each cell's per-example results (both walks ran on every example).
    """
    register_candidates()
    worst: Dict[str, List[Tuple[float, float, str, str, str]]] = {}
    names = {f"len<={t}": t for t in LENGTH_THRESHOLDS}
    cells = 0
    for cell, csv_path in _finished("tune"):
        if cell.name not in ENCODER_TUNE:
            continue
        cells += 1
        values, tokens = _read_csv(csv_path), _tokens(csv_path)
        for name, threshold in names.items():
            _add_length_rule(values, tokens, threshold, "ds:pow0.5:pm", "ds:pow0.5", name)
        methods = [m for m in values["comprehensiveness"] if m not in names]
        for name in ["ds:pow0.5", "ds:pow0.5:pm", "ds:pow0.5:l2w", "ds:pow0.25", *names]:
            # each rule is ranked against the candidates alone, not against the other thresholds
            losses = cell_losses(values, methods + ([name] if name in names else []))
            for metric, d in losses.get(name, {}).items():
                worst.setdefault(name, []).append((d["loss"], d["sem"], cell.name, metric, d["best"]))
    lines = ["# The length rule: two walks on short encoder inputs, one on long ones", "",
             "`python benchmarks/default_search.py --length-rule-table`. Per example, the rule takes PR-TAG± "
             "(`ds:pow0.5:pm`, the two-way walk) on inputs of at most *L* real tokens and PR-TAG (`ds:pow0.5`) "
             "on longer ones; both ran on every example, so no new explanation is computed.", "",
             f"## Tune halves: worst case by the default search's rule ({cells} encoder cells)", "",
             "Loss = paired loss to the best other candidate of the cell (positive = worse), worst over the cells "
             "and both metrics.", "",
             "| construction | worst case | where | to | mean loss |", "|---|---|---|---|---|"]
    for name in ["ds:pow0.5", "ds:pow0.5:pm", "ds:pow0.5:l2w", "ds:pow0.25", *names]:
        if len(worst.get(name, [])) != 2 * cells:
            continue
        top = max(worst[name])
        mean = sum(w[0] for w in worst[name]) / len(worst[name])
        lines.append(f"| {_label(name)} | {_fmt(top[0], top[1])} | {top[2]} {top[3]} | "
                     f"{_label(top[4])} | {mean:+.3f} |")
    lines += ["", "## Held-out halves (the matrix): the rule at L = 64, paired per example", "",
              "Rule − method (comprehensiveness: > 0 is better; sufficiency: < 0 is better), mean ± paired s.e.; "
              "`share two-way` is the fraction of the cell's examples with at most 64 tokens.", "",
              "| cell | n | share two-way | − PR-TAG | − GAE | − LIG | − AttnLRP |", "|---|---|---|---|---|---|---|"]
    for name in ENCODER_MATRIX:
        csv_path = MATRIX_DIR / name / "results.csv"
        if not csv_path.exists():
            continue
        values, tokens = _read_csv(csv_path), _tokens(csv_path)
        if "pr-tag-pm" not in values["comprehensiveness"] or "pr-tag" not in values["comprehensiveness"]:
            continue
        _add_length_rule(values, tokens, 64, "pr-tag-pm", "pr-tag", "rule")
        common = sorted(values["comprehensiveness"]["rule"])
        share = sum(tokens[e] <= 64 for e in common) / len(common)
        parts = []
        for other in ("pr-tag", "gae", "ig", "attnlrp"):
            if other not in values["comprehensiveness"]:
                parts.append("")
                continue
            both = []
            for metric, _ in METRICS:
                table = values[metric]
                paired = sorted(set(table["rule"]) & set(table[other]))
                both.append(_fmt(*_mean_sem([table["rule"][e] - table[other][e] for e in paired])))
            parts.append(" / ".join(both))
        lines.append(f"| {name} | {len(common)} | {share:.2f} | " + " | ".join(parts) + " |")
    path = path or RESULTS / "length-rule.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_summary() -> Path:
    register_candidates()
    lines = ["# PR-XAI default search", "",
             "Written by `python benchmarks/default_search.py --summary`; see `docs/research/default_search.md` for the "
             "candidates, the rule and the conclusions. ERASER deletion, bins 1/5/10/20/50%; every cell's folder "
             "has its full table (`summary.md`), per-example rows (`results.csv`) and exact command (`COMMAND`).", ""]
    data = {}
    for half, title in (("tune", "Tune halves (choosing)"), ("holdout", "Held-out halves (confirming)")):
        body, data[half] = half_tables(half)
        lines += [f"## {title}", ""] + body + [""]
    path = RESULTS / "summary.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    (RESULTS / "summary.json").write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", action="append", default=[], choices=sorted(CELLS))
    parser.add_argument("--half", choices=("tune", "holdout"), default="tune")
    parser.add_argument("--methods", default="tune",
                        help="comma-separated method names; 'tune' stands for the main candidates + gae, random, "
                        "'extra' for the signed and fused candidates, 'long' for those of the long cells")
    parser.add_argument("--n", type=int, default=None, help="examples (default: the cell's n for the half)")
    parser.add_argument("--out", default=None,
                        help="write to this folder instead of results/default-search/<half>/<cell> (side runs on "
                             "a subset of examples; seed it with the cell's cache.jsonl to reuse its explanations)")
    parser.add_argument("--max-length", type=int, default=None,
                        help="wordpiece budget instead of the cell's (e.g. 512, the matrix's length for MiniLM BBC News)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--summary", action="store_true", help="write results/default-search/summary.md")
    parser.add_argument("--later-table", action="store_true",
                        help="write results/default-search/later.md: the later constructions against PR-TAG")
    parser.add_argument("--length-rule-table", action="store_true",
                        help="write results/default-search/length-rule.md: two walks on short encoder inputs")
    parser.add_argument("--fourth-table", action="store_true",
                        help="write results/default-search/fourth.md: the fourth round's constructions, paired")
    parser.add_argument("--fifth-table", action="store_true",
                        help="write results/default-search/fifth.md: the default's damping and LIG-50, paired")
    parser.add_argument("--sixth-table", action="store_true",
                        help="write results/default-search/sixth.md: leaky walks, no edges back to [CLS], damping "
                             "0.85, paired")
    parser.add_argument("--seventh-table", action="store_true",
                        help="write results/default-search/seventh.md: two walks at γ = 0.25 and 0, paired")
    parser.add_argument("--seventh-decoders-table", action="store_true",
                        help="write results/default-search/seventh-decoders.md: the decoders' two walks at γ = 0.25, "
                             "paired")
    parser.add_argument("--eighth-table", action="store_true",
                        help="write results/default-search/eighth.md: the MPNet BBC News tune half, and the rule's "
                             "worst case over it and the seventh round's halves")
    parser.add_argument("--ninth-table", action="store_true",
                        help="write results/default-search/ninth.md: one walk and the gate on the 12-layer encoder, "
                             "the gate's threshold scan and the rule's worst case over the ninth, eighth and seventh "
                             "rounds' halves")
    parser.add_argument("--tenth-table", action="store_true",
                        help="write results/default-search/tenth.md: the gate on the 6-layer encoder's tune halves, "
                             "and the rule's worst case with the gate on every encoder over the tenth, ninth and "
                             "eighth rounds' halves (the nine encoder tune halves)")
    parser.add_argument("--twelfth-table", action="store_true",
                        help="write results/default-search/twelfth.md: the 12-layer default with one graph option "
                             "changed (layer subsets, per-layer mass, damping 0.5, max over heads, hubs 1 and 2, the "
                             "global PageRank, the log-probability) on its long tune halves, with the bins where LIG "
                             "leads, and hubs 1 and 2 and the log-probability on the held-out halves against LIG")
    parser.add_argument("--eleventh-table", action="store_true",
                        help="write results/default-search/eleventh.md: damping 0.85 on the 12-layer default and "
                             "relative PageRank (hubs raised or lowered) against each encoder's default on the eleven "
                             "encoder tune halves, the hub rules' worst cases, and the held-out halves against LIG")
    parser.add_argument("--thirteenth-table", action="store_true",
                        help="write results/default-search/thirteenth.md: each encoder's default on the class's "
                             "log-probability against the same on its logit on the eleven encoder tune halves, the "
                             "two rules' worst cases, and the held-out halves against LIG")
    parser.add_argument("--fourteenth-table", action="store_true",
                        help="write results/default-search/fourteenth.md: the decoders' default on the class's "
                             "log-probability against the same on its logit on the decoder tune halves, both rules' "
                             "worst cases, and the held-out halves against LIG")
    parser.add_argument("--fifteenth-table", action="store_true",
                        help="write results/default-search/fifteenth.md: each encoder's default against it plus "
                             "gradient x input (MPNet) and with its heads averaged signed, on the encoder tune "
                             "halves, and held out")
    parser.add_argument("--sixteenth-table", action="store_true",
                        help="write results/default-search/sixteenth.md: each encoder's default against it with "
                             "a share (ρ = 0.5, 0.25) of its heads' pushes against an edge cancelling the pushes for "
                             "it, with the edges its heads push against on the net left out, with its graphs averaged "
                             "along the path of Integrated Gradients, and with each edge scaled by its heads' "
                             "agreement, on the encoder tune halves")
    parser.add_argument("--sixteenth-decoders-table", action="store_true",
                        help="write results/default-search/sixteenth-decoders.md: the decoders' default against it "
                             "with the hubs' weight, on the decoder tune halves")
    parser.add_argument("--seventeenth-table", action="store_true",
                        help="write results/default-search/seventeenth.md: each encoder's default against the same "
                             "from a pass under conservative propagation (CP-LRP's backward pass), alone and times "
                             "that pass's gradient x input, with CP-LRP's relevance as a reference, on the encoder "
                             "tune halves, and held out")
    parser.add_argument("--seventeenth-decoders-table", action="store_true",
                        help="write results/default-search/seventeenth-decoders.md: the decoders' default against "
                             "the same from the conservative pass (the softmax held), times its gradient x input, and "
                             "with the RMSNorm scales held too, on the decoder tune halves")
    parser.add_argument("--walk-correlation", default=None, metavar="DIR",
                        help="write DIR/walk_correlation.csv from DIR/cache.jsonl: the two walks' correlation per "
                             "example (the gate's signal)")
    parser.add_argument("--tables", default=None, metavar="DIR",
                        help="write DIR/losses.md: the tables of --summary for one side run (with --cell, --half)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    methods: List[str] = []
    for item in (m.strip() for m in args.methods.split(",")):
        groups = {"tune": TUNE_METHODS, "extra": EXTRA, "long": LONG_METHODS, "later": LATER, "fourth": FOURTH,
                  "fourth-long": FOURTH_LONG, "fourth-holdout": FOURTH_HOLDOUT, "fifth": FIFTH,
                  "sixth": SIXTH, "seventh": SEVENTH, "seventh-decoders": SEVENTH_DECODERS,
                  "eighth": EIGHTH, "ninth": NINTH, "gated": GATED, "tenth": TENTH,
                  "eleventh": ELEVENTH, "eleventh-d85": GATED + [ELEVENTH_D85],
                  "eleventh-hubs": GATED + ELEVENTH_HUBS,
                  "eleventh-minilm": [FOURTH_LEAD] + ELEVENTH_MINILM, "eleventh-decoders": ELEVENTH_DECODERS,
                  "twelfth": TWELFTH, "thirteenth-minilm": THIRTEENTH_MINILM, "thirteenth-mpnet": THIRTEENTH_MPNET,
                  "thirteenth-decoders": THIRTEENTH_DECODERS, "fifteenth": FIFTEENTH,
                  "fifteenth-minilm": FIFTEENTH_MINILM_RUN, "sixteenth": SIXTEENTH,
                  "sixteenth-minilm": SIXTEENTH_MINILM_RUN, "sixteenth-decoders": SIXTEENTH_DECODERS,
                  "seventeenth": SEVENTEENTH, "seventeenth-minilm": SEVENTEENTH_MINILM_RUN,
                  "seventeenth-decoders": SEVENTEENTH_DECODERS}
        methods += groups[item] if item in groups else [item] if item else []
    if args.half == "holdout" and args.cell and not args.tables and "tune" in args.methods.split(","):
        parser.error("the held-out half only confirms: pass --methods with the chosen candidate and references")
    for name in args.cell if not args.tables else []:
        print(run_cell(CELLS[name], args.half, methods, args.n, argv, Path(args.out) if args.out else None,
                       args.max_length), flush=True)
    if args.tables:
        if len(args.cell) != 1:
            parser.error("--tables needs exactly one --cell (the cell the side run belongs to)")
        body, _ = half_tables(args.half, [(CELLS[args.cell[0]], Path(args.tables) / "results.csv")])
        (Path(args.tables) / "losses.md").write_text("\n".join([f"# {args.tables}", ""] + body), encoding="utf-8")
        print(Path(args.tables) / "losses.md")
    if args.walk_correlation:
        print(write_walk_correlation(Path(args.walk_correlation)))
    if args.summary:
        print(write_summary())
    if args.later_table:
        print(write_later_table(args.half))
    if args.length_rule_table:
        print(write_length_rule_table())
    if args.fourth_table:
        print(write_fourth_table())
    for flag in ROUNDS:
        if getattr(args, flag[2:].replace("-", "_")):
            print(_round_table(flag))
    return 0


if __name__ == "__main__":
    sys.exit(main())
