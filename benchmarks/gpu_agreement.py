"""Do the scores on a GPU equal the scores on CPU? Every method, three shapes, fp32 and bf16.

The trust check that goes with ``benchmarks/gpu_speed.py`` on a lent GPU. For models of MiniLM-L6's and
MPNet-base's shape (:func:`captum_prxai.bench.speed.config_model`) and a decoder of SmolLM2-135M's shape
(Llama: 30 layers, 576 wide, 9 query and 3 key/value heads), all randomly initialised with a fixed seed so that
no weights travel, it scores one batch of two inputs, the second one padded, with each method through the
registry (:func:`captum_prxai.methods.registry.build_method`, the callables every app uses):

* on CPU in fp32, the reference;
* on the GPU in fp32 (TF32 off, so fp32 means fp32);
* on the GPU in bf16 (the model cast; what the library keeps in fp32 is in ``docs/speed.md``).

For each it reports the largest absolute difference over the real tokens, relative to the largest reference
score, the smallest Spearman correlation of a row with its reference row (tied scores share their average rank), and the overlap of the ten
top-ranked tokens. Padding's scores must be zero on every device. Random weights give flatter scores than a
trained model, so ties make the bf16 rank figures a lower bound; the fp32 figures are the check.

Run on the device machine (captum travels as a wheel, as for ``gpu_speed.py``)::

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu_agreement.py --out $OUT/agreement

On CPU it runs for a check with ``--device cpu`` (the "GPU" columns then repeat CPU).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Dict, Optional, Sequence

import torch
from torch import nn

METHODS = "pr-a,pr-g,pr-ag,pr-tag,default,pr-tag-pm,gae,rollout,ig"


def decoder_model() -> nn.Module:
    """A randomly initialised classifier of SmolLM2-135M's shape (Llama, grouped-query attention)."""
    from transformers import LlamaConfig, LlamaForSequenceClassification

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
                         num_labels=2, pad_token_id=0, tie_word_embeddings=True)
    return LlamaForSequenceClassification(config).eval()


def _model(shape: str) -> nn.Module:
    from captum_prxai.bench.speed import config_model

    return decoder_model() if shape == "smollm2" else config_model(shape, 512)


def _inputs(shape: str, length: int, device: torch.device):
    """Two inputs of ``length`` tokens; the second has its last quarter padded (left-padded for the decoder)."""
    generator = torch.Generator().manual_seed(length)
    ids = torch.randint(1000, 29000, (2, length), generator=generator)
    mask = torch.ones_like(ids)
    pad = length // 4
    if shape == "smollm2":
        ids[1, :pad], mask[1, :pad] = 0, 0
    else:
        ids[:, 0], ids[:, -1] = 101, 102
        ids[1, -pad:], mask[1, -pad:] = 0, 0
        ids[1, -pad - 1] = 102
    special = torch.zeros_like(ids)
    if shape != "smollm2":
        special[:, 0] = 1
        special[0, -1] = special[1, -pad - 1] = 1
    target = torch.tensor([1, 0])
    return [t.to(device) for t in (ids, mask, special, target)]


def _scores(model: nn.Module, shape: str, method: str, length: int, device: torch.device) -> torch.Tensor:
    from captum_prxai.methods.registry import MethodContext, build_method, make_forward_func

    context = MethodContext(pad_token_id=0, mask_token_id=103 if shape != "smollm2" else None,
                            options={"ig": {"n_steps": 50, "internal_batch_size": 2}})
    explainer = build_method(method, model, make_forward_func(model), context)
    ids, mask, special, target = _inputs(shape, length, device)
    out = explainer(ids, mask, special, target)
    scores = out if isinstance(out, torch.Tensor) else out[0]
    return scores.detach().float().cpu()


def _spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman's rho with tied scores given their average rank (ties do not count as order); 1.0 if both are flat."""
    from scipy.stats import spearmanr

    if a.unique().numel() == 1 and b.unique().numel() == 1:
        return 1.0
    rho = spearmanr(a.double().numpy(), b.double().numpy())[0]
    return 0.0 if rho != rho else float(rho)  # one side flat, the other not: no agreement in order


def compare(reference: torch.Tensor, other: torch.Tensor, mask: torch.Tensor) -> Dict[str, float]:
    """Relative max difference, smallest row Spearman, smallest top-10 overlap, and the largest padding score."""
    real = mask.bool()
    scale = reference[real].abs().max().clamp_min(1e-12)
    rows = range(reference.shape[0])
    top = [len(set(reference[i][real[i]].topk(10).indices.tolist())
               & set(other[i][real[i]].topk(10).indices.tolist())) / 10 for i in rows]
    return dict(rel_max_diff=float((reference - other)[real].abs().max() / scale),
                spearman=min(_spearman(reference[i][real[i]], other[i][real[i]]) for i in rows),
                top10=min(top), padding=float(other[~real].abs().max()) if (~real).any() else 0.0)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--shapes", default="minilm,mpnet,smollm2")
    p.add_argument("--length", type=int, default=256)
    p.add_argument("--methods", default=METHODS, help="'default' is each model's default (PR-TAG± by depth)")
    p.add_argument("--out", required=True, help="path stem: writes <out>.md")
    args = p.parse_args(argv)

    from gpu_speed import open_device, resolve_method  # the script beside this one

    device = open_device(args.device)
    if device is None:
        return 2
    hardware = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    command = "python3 benchmarks/gpu_agreement.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    lines = [f"# Scores on {hardware} against CPU, fp32 and bf16", "", f"Command: `{command}`", "",
             f"torch {torch.__version__}; {args.length} tokens, batch 2 (the second input padded by a quarter); "
             "random weights with a fixed seed. rel. max |Δ|: the largest absolute difference over real tokens "
             "÷ the largest CPU score; ρ: the smallest row Spearman correlation with CPU; top-10: the smallest "
             "overlap of the ten top-ranked tokens; padding: the largest score on a padded position.", "",
             "| model | method | device, dtype | rel. max abs diff | ρ | top-10 | padding |",
             "|---|---|---|---|---|---|---|"]
    out = Path(args.out).with_suffix(".md")
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for shape in args.shapes.split(","):
        cpu_model = _model(shape)
        variants = {"fp32": _model(shape).to(device), "bf16": _model(shape).to(device=device, dtype=torch.bfloat16)}
        _, mask, _, _ = _inputs(shape, args.length, torch.device("cpu"))
        names = [resolve_method(m, cpu_model) for m in args.methods.split(",")]
        for name in dict.fromkeys(names):  # the default may repeat a listed method
            try:
                reference = _scores(cpu_model, shape, name, args.length, torch.device("cpu"))
            except Exception as err:  # noqa: BLE001 - a method the shape refuses is a row
                lines.append(f"| {shape} | {name} | cpu fp32 | {type(err).__name__}: {str(err)[:100]} | | | |")
                continue
            for dtype, model in variants.items():
                try:
                    row = compare(reference, _scores(model, shape, name, args.length, device), mask)
                    lines.append(f"| {shape} | {name} | {device.type} {dtype} | {row['rel_max_diff']:.1e} | "
                                 f"{row['spearman']:.4f} | {row['top10']:.1f} | {row['padding']:.1e} |")
                except Exception as err:  # noqa: BLE001 - a failure on the device is the finding
                    lines.append(f"| {shape} | {name} | {device.type} {dtype} | "
                                 f"failed: {type(err).__name__}: {str(err)[:100]} | | | |")
                print(f"[{time.perf_counter() - start:5.0f} s] {lines[-1]}", flush=True)
            out.write_text("\n".join(lines) + "\n")
        del variants
        if device.type == "cuda":
            torch.cuda.empty_cache()
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
