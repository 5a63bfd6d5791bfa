"""How much of the default's PageRank mass sits on the explained token, and how much of it comes back along edges.

Personalised PageRank teleports to the explained token (``[CLS]`` on an encoder), so that token holds at least
``1 − damping`` of each walk's mass (0.3 at the library's damping 0.7) whatever the graph; the rest of its share
comes back along the edges into it. This script measures both on the tune halves of
:mod:`default_search`'s cells, for the library's default (``PageRankAttribution`` with its defaults: two walks,
λ = 0.25 on encoders) as it is (``sink="keep"`` on an encoder) and with the edges into the first token dropped
(``sink="drop"``: the walk comes back to ``[CLS]`` by the teleport alone). The deletion metrics never remove the
explained token (a special token on encoders; kept by ``protect_explained`` on decoders), and the pictures scale
their colours to the largest ordinary token, so the share itself moves neither; what the edges back to it change in
the other tokens' scores is measured as the sixth round's ``ds:pow0.5:pm0.25:nosink`` candidate
(docs/research/default_search.md).

Run (one line per cell, then the table)::

    python benchmarks/explained_token_mass.py --cell minilm--movie-sentences --cell mpnet--movie-reviews --n 30
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Sequence

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import default_search  # noqa: E402  (the cells: model, dataset, length)

OUT = default_search.RESULTS / "explained_token_mass.md"


def measure(cell_name: str, n: int) -> List[str]:
    """One table row per ``sink`` setting: the mean (min–max) share of each walk's mass on the explained token."""
    import captum_prxai
    from captum_prxai.bench.ablation import dataset_half
    from captum_prxai.data import load_dataset
    from captum_prxai.models import load_default, load_model

    cell = default_search.CELLS[cell_name]
    model, tokenizer = load_default() if cell.model == "default" else load_model(cell.model)
    model.eval()
    data = dataset_half(load_dataset(cell.dataset, "test"), "tune")
    layers = captum_prxai.attention_layers(model)

    def forward(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return model(input_ids=ids, attention_mask=mask).logits

    rows = []
    for sink in ("keep", "drop"):
        attr = captum_prxai.PageRankAttribution(forward, layers, sink=sink)
        positive, negative = [], []
        for text in data.texts[:n]:
            enc = tokenizer(text, return_tensors="pt", truncation=True, max_length=cell.max_length or 512)
            built = attr.attribute_graph(enc["input_ids"], additional_forward_args=(enc["attention_mask"],)).built
            explained = built.teleport.argmax(-1)
            walks = captum_prxai.pagerank(torch.cat([built.adjacency, built.negative]), attr.spec.damping,
                                          personalization=built.teleport.repeat(2, 1),
                                          node_mask=built.mask.repeat(2, 1), tol=attr.spec.tol,
                                          max_iter=attr.spec.max_iter)
            positive.append(float(walks[0, explained[0]]))
            negative.append(float(walks[1, explained[0]]))
        rows.append(f"| {cell_name} | `sink=\"{sink}\"` | {len(positive)} | {1 - attr.spec.damping:.2f} | "
                    f"{_spread(positive)} | {_spread(negative)} |")
    return rows


def _spread(values: Sequence[float]) -> str:
    return f"{sum(values) / len(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cell", action="append", required=True, choices=sorted(default_search.CELLS))
    parser.add_argument("--n", type=int, default=30, help="examples of each tune half (the first n)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for name in args.cell:
        rows += measure(name, args.n)
        print(rows[-2], rows[-1], sep="\n", flush=True)
    command = "python benchmarks/explained_token_mass.py " + " ".join(f"--cell {c}" for c in args.cell) + \
        f" --n {args.n}"
    lines = ["# The explained token's share of the default's PageRank mass", "", f"`{command}`", "",
             "Each walk's PageRank sums to one; the teleport alone puts `1 − damping` on the explained token "
             "(`[CLS]`). Mean (min–max) over the first examples of each tune half.", "",
             "| cell | edges into `[CLS]` | n | teleport floor | positive walk on `[CLS]` | negative walk on `[CLS]` |",
             "|---|---|---:|---:|---:|---:|"] + rows + [""]
    OUT.write_text("\n".join(lines), encoding="utf-8")
    print(OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
