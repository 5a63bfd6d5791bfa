"""Faithfulness benchmark of a prompted decoder-only classifier (SmolLM2-135M, zero-shot label words).

The decoder reads the text inside its prompt; :class:`~captum_prxai.models.prompting.PromptTokenizer`
marks the prompt tokens as special, so only the text's tokens are scored and removed.

Run (from the repository root; needs ``pip install gguf``)::

    python benchmarks/decoder_benchmark.py --n 40 --out benchmarks/results/decoder-smollm2-movie-sentences
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decoder", default="smollm2")
    parser.add_argument("--dataset", default="movie-sentences")
    parser.add_argument("--half", default="holdout", choices=("tune", "holdout"))
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--methods", default="pr-ag,pr-g,pr-a,gae,rollout,raw-attention,ixg,random")
    parser.add_argument("--option", action="append", default=[], metavar="METHOD.KEY=VALUE")
    parser.add_argument("--out", default=None)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from captum_prxai.bench.ablation import dataset_half, register_variants, VARIANTS
    from captum_prxai.bench.runner import run_benchmark, write_command
    from captum_prxai.commands.benchmark import parse_options
    from captum_prxai.data import load_dataset
    from captum_prxai.models.decoder import load_decoder_classifier
    from captum_prxai.models.prompting import PromptTokenizer

    classifier = load_decoder_classifier(args.decoder)
    tokenizer = PromptTokenizer(classifier)
    dataset = dataset_half(load_dataset(args.dataset, "test"), args.half)
    methods = [m for m in args.methods.split(",") if m]
    register_variants({m: VARIANTS[m] for m in methods if m in VARIANTS})
    out = Path(args.out or f"benchmarks/results/decoder-{args.decoder}-{args.dataset}")
    result = run_benchmark(classifier, tokenizer, dataset, methods, n=args.n, out_dir=out,
                           method_options=parse_options(args.option), model_name=args.decoder)
    write_command(out, "python benchmarks/decoder_benchmark.py", argv or sys.argv[1:])
    print(result.files.get("markdown", out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
