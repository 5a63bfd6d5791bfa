"""PR-XAI ablation: edge weight x graph x teleport x damping (and more), on disjoint tuning and held-out halves.

Each variant is a :class:`~captum_prxai.PageRankAttribution` configuration,
registered as a benchmark method named ``pr:<edge>:<graph>:<teleport>:<damping>[:extra]``
and scored by :func:`~captum_prxai.bench.runner.run_benchmark` next to the
baselines. The test split is shuffled with a fixed seed and cut in two
halves: defaults are chosen on ``tune`` and confirmed on ``holdout``.

Run::

    captum-prxai ablation --dataset movie-sentences --half tune --n 200


"""

from __future__ import annotations

from typing import Any, Dict, List

import torch

from captum_prxai.methods import register_pr_method

__all__ = ["VARIANTS", "variant_name", "register_variants", "dataset_half"]

_EDGE_SHORT = {"attention": "a", "gradient": "g", "attention_gradient": "ag", "gradient_abs": "absg",
               "attention_gradient_abs": "absag"}


def variant_name(edge_weight: str = "attention_gradient", graph: str = "token", teleport: str = "target",
                 damping: float = 0.85, **extra: Any) -> str:
    name = f"pr:{_EDGE_SHORT[edge_weight]}:{graph}:{teleport}:{damping:g}"
    for key, value in sorted(extra.items()):
        name += f":{key}={value}"
    return name


def _grid() -> List[Dict[str, Any]]:
    """One factor at a time around (AG, token, target, 0.85), plus the interactions that matter."""
    grid: List[Dict[str, Any]] = []
    for edge in _EDGE_SHORT:
        grid.append({"edge_weight": edge})
    for edge in ("attention", "gradient", "attention_gradient"):
        grid.append({"edge_weight": edge, "graph": "layered"})
        grid.append({"edge_weight": edge, "teleport": "uniform"})
        grid.append({"edge_weight": edge, "teleport": "input_gradient"})
    for damping in (0.5, 0.7, 0.95):
        grid.append({"edge_weight": "attention_gradient", "damping": damping})
        grid.append({"edge_weight": "gradient", "damping": damping})
    grid.append({"edge_weight": "attention_gradient", "normalize_layers": True})
    grid.append({"edge_weight": "gradient", "normalize_layers": True})
    grid.append({"edge_weight": "attention_gradient", "residual": 0.5})
    grid.append({"edge_weight": "attention_gradient", "head_reduction": "max"})
    for edge in ("attention", "gradient", "attention_gradient"):
        grid.append({"edge_weight": edge, "signed": True})
    grid.append({"edge_weight": "attention_gradient", "teleport": "input_gradient", "signed": True})
    for damping in (0.5, 0.7):
        grid.append({"edge_weight": "gradient", "damping": damping, "normalize_layers": True})
        grid.append({"edge_weight": "gradient", "damping": damping, "signed": True})
        grid.append({"edge_weight": "gradient", "damping": damping, "normalize_layers": True, "signed": True})
        grid.append({"edge_weight": "attention_gradient", "damping": damping, "normalize_layers": True})
    for edge in ("gradient", "attention_gradient"):  # decoders: keep the attention sink and self-loops
        grid.append({"edge_weight": edge, "damping": 0.7, "sink": "keep", "self_loops": "keep"})
    grid.append({"edge_weight": "gradient", "damping": 0.7, "self_loops": "drop"})
    grid.append({"edge_weight": "attention_gradient", "damping": 0.7, "self_loops": "drop"})
    grid.append({"edge_weight": "gradient", "teleport": "input_gradient", "damping": 0.5})
    grid.append({"edge_weight": "attention_gradient", "teleport": "input_gradient", "damping": 0.5})
    return grid


#: Every setting a variant's name shows is passed explicitly, so a name keeps its meaning when the
#: library's defaults change.
_NAMED = {"edge_weight": "attention_gradient", "graph": "token", "teleport": "target", "damping": 0.85,
          "walks": "positive", "hub_power": 0.0}
VARIANTS: Dict[str, Dict[str, Any]] = {variant_name(**kw): {**_NAMED, **kw} for kw in _grid()}


def register_variants(variants: Dict[str, Dict[str, Any]] = VARIANTS) -> List[str]:
    """Register each variant as a benchmark method (idempotent); returns their names."""
    for name, kwargs in variants.items():
        register_pr_method(name, kwargs, description=f"PageRankAttribution({kwargs})")
    return list(variants)


def dataset_half(dataset: Any, half: str, seed: int = 1234) -> Any:
    """The ``tune`` or ``holdout`` half of a dataset, from a seeded shuffle (disjoint by construction)."""
    from captum_prxai.data import TextDataset

    order = torch.randperm(len(dataset.texts), generator=torch.Generator().manual_seed(seed)).tolist()
    cut = len(order) // 2
    chosen = sorted(order[:cut] if half == "tune" else order[cut:])
    return TextDataset(name=f"{dataset.name}-{half}", split=dataset.split,
                       texts=[dataset.texts[i] for i in chosen], labels=[dataset.labels[i] for i in chosen],
                       label_names=list(dataset.label_names))
