"""What attention flow costs, next to attention rollout, on the default model (MiniLM-L6, 6 layers).

Times one example per length: the attention capture (one forward pass, shared
with rollout) and the maximum-flow solves (one per input token). Lengths come
from truncating one long movie review. Writes a Markdown table.

    python benchmarks/attention_flow_cost.py --lengths 32,128,256,512 --out benchmarks/results/attention_flow_cost.md
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import torch

import captum_prxai as cp
from captum_prxai.data import load_dataset
from captum_prxai.graph import layered_max_flow, layered_transitions, propagate, with_residual
from captum_prxai.models import load_default


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="32,128,256,512")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="benchmarks/results/attention_flow_cost.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = load_default()
    text = max(load_dataset("movie-reviews", "test").texts[:50], key=len)
    layers = cp.attention_layers(model)
    rows = []
    for length in [int(x) for x in args.lengths.split(",")]:
        enc = tok(text, truncation=True, max_length=length, return_tensors="pt")
        ids, mask = enc["input_ids"], enc["attention_mask"]
        with torch.no_grad(), cp.AttentionRecorder(layers, lambda i, a, g: a.mean(dim=1)) as rec:
            start = time.perf_counter()
            model(ids, attention_mask=mask)
            capture = time.perf_counter() - start
        maps = [m.detach() for m in rec.maps]
        start = time.perf_counter()
        propagate(torch.nn.functional.one_hot(torch.tensor([0]), ids.shape[1]).float(),
                  [with_residual(m, 0.5) for m in maps])
        rollout = time.perf_counter() - start
        transitions = layered_transitions(maps, 0.5, mask.bool())
        start = time.perf_counter()
        layered_max_flow(transitions, mask.bool(), torch.tensor([0]))
        flow = time.perf_counter() - start
        rows.append((ids.shape[1], capture, rollout, flow))
        print(f"T={ids.shape[1]}: capture {capture:.3f} s, rollout {rollout * 1e3:.2f} ms, flow {flow:.2f} s",
              flush=True)
    lines = [
        "# Attention flow: cost per example",
        "",
        "Default model (MiniLM-L6, 6 layers, 12 heads), one movie review truncated to T tokens, CPU, "
        f"{args.threads} thread(s). Flow = one SciPy Dinic maximum flow per input token on the layered graph "
        "((L + 1) T nodes, L T² edges).",
        "",
        "| T | forward + capture (s) | rollout on the maps (ms) | attention flow on the maps (s) | flow / forward |",
        "|---:|---:|---:|---:|---:|",
    ]
    for length, capture, rollout, flow in rows:
        lines.append(f"| {length} | {capture:.3f} | {rollout * 1e3:.2f} | {flow:.2f} | {flow / capture:.1f}× |")
    command = "python benchmarks/attention_flow_cost.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    lines += ["", f"Command: `{command}`", ""]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines))
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
