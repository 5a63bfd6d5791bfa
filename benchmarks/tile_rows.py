"""CPU time of one attention layer's capture against the rows per tile (the choice of ``CPU_TILE_ROWS``).

One MiniLM-sized layer (12 heads of 32 dimensions, random ``q, k, v``), batch 1:
the fused SDPA forward + backward as the reference, then
:class:`captum_prxai._attention_math.RecomputedAttention` forward + backward
with the default edge map (PR-TAG) reduced tile by tile, for several tile
heights. Median CPU time of the rounds, one torch thread; prints a Markdown
table with the command.

    OMP_NUM_THREADS=1 python benchmarks/tile_rows.py --lengths 512,4096 --rows 8,16,32,64,512
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from typing import Callable, Optional

import torch
import torch.nn.functional as F

from captum_prxai.hooks import RecomputedAttention
from captum_prxai.graph.spec import GraphSpec

HEADS, DIM = 12, 32


def _cpu_time(call: Callable[[], None], repeats: int) -> float:
    call()
    times = []
    for _ in range(repeats):
        start = time.process_time()
        call()
        times.append(time.process_time() - start)
    return statistics.median(times)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="512,4096")
    parser.add_argument("--rows", default="8,16,32,64,512")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    spec = GraphSpec(edge_weight="tempered_attention_gradient")
    print(f"`OMP_NUM_THREADS=1 python benchmarks/tile_rows.py {' '.join(shlex.quote(a) for a in (argv or sys.argv[1:]))}`"
          f" (torch {torch.__version__}, 1 thread)\n")
    print("| T | rows per tile | layer forward + backward with maps (s) | fused SDPA forward + backward (s) | ratio |")
    print("|---|---|---|---|---|")
    for length in (int(t) for t in args.lengths.split(",")):
        gen = torch.Generator().manual_seed(length)
        q, k, v = (torch.randn(1, HEADS, length, DIM, generator=gen, requires_grad=True) for _ in range(3))
        grad = torch.randn(1, HEADS, length, DIM, generator=gen)
        scale = DIM ** -0.5

        def fused() -> None:
            F.scaled_dot_product_attention(q, k, v, scale=scale).backward(grad)

        base = _cpu_time(fused, args.repeats)
        out = torch.empty(1, length, length)
        for rows in (int(r) for r in args.rows.split(",")):
            if rows > length:
                continue

            def sink(a: torch.Tensor, g: Optional[torch.Tensor], part: slice) -> None:
                out[:, part] = spec.edge_map(a, g)

            def captured(rows: int = rows) -> None:
                RecomputedAttention.apply(q, k, v, None, scale, False, 1, sink, False, rows).backward(grad)

            t = _cpu_time(captured, args.repeats)
            print(f"| {length} | {rows} | {t:.4f} | {base:.4f} | {t / base:.2f}× |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
