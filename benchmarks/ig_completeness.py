"""How well Integrated Gradients converges on each model of the matrix (completeness check).

Integrated Gradients satisfies completeness: the attributions sum to f(x) - f(baseline)
(Sundararajan et al., 2017, "Axiomatic Attribution for Deep Networks"). The gap between the
two sides (Captum's convergence delta) measures how well the path integral was approximated.
The benchmark runs IG exactly as here: LayerIntegratedGradients on the input embeddings,
Gauss-Legendre, 50 steps, every real token replaced by the padding token in the baseline.

For each model this script takes the first N examples of the held-out half that the matrix
uses and reports the median relative gap |delta| / |f(x) - f(baseline)|, and the roughness
of the straight-line path: the largest jump of the target logit between neighbouring points
of a 41-point grid, relative to |f(x) - f(baseline)| (a linear path gives 1/40), and the largest
such jump in logits.

    python benchmarks/ig_completeness.py --n 20 --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Sequence

import torch

RESULTS = Path(__file__).resolve().parent / "results"

#: (model in the cache, dataset) pairs: one encoder of each architecture, on movie sentences.
MODELS = (("default", "movie-sentences"),
          ("mpnet-movie-sentences", "movie-sentences"),
          ("smollm2-movie-sentences", "movie-sentences"))


def _path_logits(model: torch.nn.Module, ids: torch.Tensor, base: torch.Tensor, mask: torch.Tensor,
                 target: int, points: int = 41) -> List[float]:
    """The target logit along the straight line from the baseline's embeddings to the input's."""
    embed = model.get_input_embeddings()
    with torch.no_grad():
        start, end = embed(base), embed(ids)
        steps = torch.linspace(0.0, 1.0, points)
        return [float(model(inputs_embeds=start + a * (end - start), attention_mask=mask).logits[0, target])
                for a in steps]


def check_model(name: str, dataset_name: str, n: int) -> Dict[str, float]:
    from captum.attr import LayerIntegratedGradients

    from captum_prxai.bench.ablation import dataset_half
    from captum_prxai.methods import IG_DEFAULTS, MethodContext, make_forward_func
    from captum_prxai.methods.builtin import reference_ids
    from captum_prxai.data import load_dataset
    from captum_prxai.models import load_model

    model, tokenizer = load_model(name)
    model.eval()
    dataset = dataset_half(load_dataset(dataset_name, "test"), "holdout")
    forward = make_forward_func(model)
    ctx = MethodContext.from_tokenizer(tokenizer)
    ig = LayerIntegratedGradients(forward, model.get_input_embeddings())
    gaps, jumps, jumps_abs, deltas = [], [], [], []
    for text in dataset.texts[:n]:
        enc = tokenizer(text, truncation=True, max_length=128, return_special_tokens_mask=True, return_tensors="pt")
        ids, mask, special = enc["input_ids"], enc["attention_mask"], enc["special_tokens_mask"]
        base = reference_ids(ids, special, mask, ctx.pad_token_id)
        with torch.no_grad():
            target = int(forward(ids, mask).argmax(-1))
        _, delta = ig.attribute(ids, baselines=base, target=target, additional_forward_args=(mask,),
                                return_convergence_delta=True, **IG_DEFAULTS)
        path = _path_logits(model, ids, base, mask, target)
        span = abs(path[-1] - path[0]) or 1e-12
        gaps.append(abs(float(delta)) / span)
        deltas.append(abs(float(delta)))
        largest = max(abs(b - a) for a, b in zip(path, path[1:]))
        jumps.append(largest / span)
        jumps_abs.append(largest)
    return {"n": len(gaps), "gap": statistics.median(gaps), "gap_max": max(gaps),
            "delta": statistics.median(deltas), "jump": statistics.median(jumps), "jump_abs": max(jumps_abs)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="examples per model (default 20)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(RESULTS / "ig_completeness.md"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for name, dataset_name in MODELS:
        stats = check_model(name, dataset_name, args.n)
        print(name, stats, flush=True)
        rows.append(f"| `{name}` | {stats['n']} | {stats['delta']:.3f} | {stats['gap']:.2f} | {stats['gap_max']:.2f} "
                    f"| {stats['jump']:.2f} | {stats['jump_abs']:.2f} |")
    command = "python benchmarks/ig_completeness.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = "\n".join([
        "# Integrated Gradients completeness per model",
        "",
        "LayerIntegratedGradients on the input embeddings, Gauss-Legendre, 50 steps, padding-token baseline "
        "(the benchmark's settings); first examples of the held-out half of movie-sentences' test split. "
        "Relative gap = |convergence delta| / |f(x) − f(baseline)| (0 = exact). Path jump = largest change of "
        "the target logit between neighbouring points of a 41-point straight-line path, over "
        "|f(x) − f(baseline)| (0.025 for a linear path; near or above 1 means the path is not smooth); the last "
        "column gives the largest such jump in logits over all examples.",
        "",
        "| model | n | median abs. delta (logits) | median relative gap | max relative gap | median path jump "
        "| max path jump (logits) |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"Command: `{command.strip()}`",
        "",
    ])
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
