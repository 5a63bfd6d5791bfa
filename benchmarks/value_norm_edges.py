"""Experiment: PR-XAI edges weighted by the size of what attention moves (norm-based analysis).

Kobayashi et al. (EMNLP 2020, "Attention is Not Only a Weight") measure what
token ``j`` contributes to token ``i`` through head ``h`` as
``||A_ij f_h(v_j)||``, with ``f_h(v_j) = W_O^h v_j^h`` the value vector after
the head's share of the output projection. Two PageRank variants test whether
that magnitude helps:

* ``pr:n:token:target:0.7``: edges ``A_ij ||f_h(v_j)||`` (forward only, like PR-A);
* ``pr:ng:token:target:0.7``: edges ``dA_ij⁺ ||f_h(v_j)||`` (PR-G's edges scaled by the value size).

Both are otherwise the defaults (token graph, teleport to the explained token,
damping 0.7, head mean). BERT-family encoders only (the value and output
projections are read from ``layer.attention.self.value`` and
``layer.attention.output.dense``). Judged like the other ablation variants: tune
half first, held-out half only for what survives.

    python benchmarks/value_norm_edges.py --half tune --n 100 --out benchmarks/results/value-norm-movie-sentences-tune
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, List, Optional

import torch
from torch import Tensor, nn

import captum_prxai as cp
from captum_prxai.bench import Explainer, register_method
from captum_prxai.graph.edges import reduce_heads


class ValueNorms:
    """Forward hooks that keep, per layer, the ``(B, H, T)`` norms ``||W_O^h v_j^h||`` of a BERT encoder."""

    def __init__(self, model: nn.Module) -> None:
        encoder = getattr(model, "bert", model).encoder
        self.norms: Dict[int, Tensor] = {}
        self.handles = []
        for index, layer in enumerate(encoder.layer):
            attention = layer.attention
            heads = attention.self.num_attention_heads
            head_size = attention.self.attention_head_size
            out_proj = attention.output.dense.weight  # (hidden, heads * head_size)

            def hook(module, args, value, index=index, heads=heads, head_size=head_size, out_proj=out_proj):
                batch, length, _ = value.shape
                per_head = value.detach().view(batch, length, heads, head_size)
                weight = out_proj.detach().view(out_proj.shape[0], heads, head_size)
                moved = torch.einsum("bthd,ohd->bhto", per_head, weight)
                self.norms[index] = moved.norm(dim=-1)  # (B, H, T)

            self.handles.append(attention.self.value.register_forward_hook(hook))


class ValueNormPageRank(cp.PageRankAttribution):
    """PageRankAttribution whose per-head edges are scaled by the size of the moved value vectors."""

    def __init__(self, forward_func, layers, norms: ValueNorms, with_gradient: bool, **kwargs) -> None:
        super().__init__(forward_func, layers, edge_weight="gradient" if with_gradient else "attention", **kwargs)
        self.norms = norms
        self.with_gradient = with_gradient

    def _layer_map(self, layer: int, attention: Tensor, grad: Optional[Tensor]) -> Tensor:
        size = self.norms.norms[layer][:, :, None, :].to(attention.dtype)  # column j: what token j moves
        base = grad.clamp(min=0) if self.with_gradient else attention
        return reduce_heads(base * size, self.head_reduction)


VARIANTS = {"pr:n:token:target:0.7": False, "pr:ng:token:target:0.7": True}
_NORMS: Dict[int, ValueNorms] = {}  # one set of hooks per model, shared by the variants


def _value_norms(model: nn.Module) -> ValueNorms:
    if id(model) not in _NORMS:
        _NORMS[id(model)] = ValueNorms(model)
    return _NORMS[id(model)]


def register() -> List[str]:
    for name, with_gradient in VARIANTS.items():
        def factory(model, forward_func, ctx, with_gradient=with_gradient, name=name) -> Explainer:
            norms = _value_norms(model)
            attr = ValueNormPageRank(forward_func, cp.attention_layers(model), norms, with_gradient,
                                     damping=0.7, teleport="target")

            def explain(ids, mask, special, target):
                return attr.attribute(ids, target=target, additional_forward_args=(mask,))

            return Explainer(name, name, explain, attr)

        register_method(name, name, "pr-xai", "value-norm edges (Kobayashi et al., 2020)", factory, overwrite=True)
    return list(VARIANTS)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--dataset", default="movie-sentences")
    parser.add_argument("--half", choices=("tune", "holdout"), default="tune")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--baselines", default="pr-g,pr-a,pr-ag,gae,random")
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from captum_prxai.bench.ablation import dataset_half
    from captum_prxai.bench.runner import run_benchmark, write_command
    from captum_prxai.data import load_dataset
    from captum_prxai.models import load_model

    model, tokenizer = load_model(args.model)
    dataset = dataset_half(load_dataset(args.dataset, "test"), args.half)
    methods = register() + [m for m in args.baselines.split(",") if m]
    out = Path(args.out)
    result = run_benchmark(model, tokenizer, dataset, methods, n=args.n, out_dir=out, model_name=args.model)
    write_command(out, "python benchmarks/value_norm_edges.py", argv or sys.argv[1:])
    print(result.files.get("markdown", out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
