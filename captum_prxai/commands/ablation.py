"""``captum-prxai ablation``: PR-XAI variants on the tuning or held-out half of a dataset's test split."""

from __future__ import annotations

import argparse

HELP = "Score PR-XAI variants (edge weight, graph, teleport, damping, ...) on a tune or held-out half."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="default",
                        help="'default', a local checkpoint folder or a trained model's name (default: %(default)s)")
    parser.add_argument("--dataset", default="movie-sentences", help="dataset name (default: %(default)s)")
    parser.add_argument("--half", choices=("tune", "holdout"), default="tune",
                        help="which half of the test split (default: %(default)s)")
    parser.add_argument("--n", type=int, default=200, help="examples (default: %(default)s)")
    parser.add_argument("--variants", default="all", help="'all' or comma-separated variant names")
    parser.add_argument("--baselines", default="gae,ig,rollout,raw-attention,ixg,random",
                        help="comma-separated baseline methods (default: %(default)s)")
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--out", default=None, help="results folder (default: benchmarks/results/ablation-DATASET-HALF)")
    parser.add_argument("--option", action="append", default=[], metavar="METHOD.KEY=VALUE")
    parser.add_argument("--threads", type=int, default=None)


def run(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    import torch

    from captum_prxai.bench.ablation import VARIANTS, dataset_half, register_variants
    from captum_prxai.bench.runner import BenchmarkConfig, one_line_warnings, run_benchmark, write_command
    from captum_prxai.data import load_dataset
    from captum_prxai.exceptions import PRXAIError
    from captum_prxai.methods import parse_methods, parse_options
    from captum_prxai.models import load_model

    if args.threads is not None and args.threads < 1:
        raise PRXAIError(f"--threads must be at least 1, got {args.threads}.")
    unknown = [v for v in args.variants.split(",") if args.variants != "all" and v not in VARIANTS]
    if unknown:
        raise PRXAIError(f"unknown variant {unknown[0]!r}; see captum_prxai.bench.ablation.VARIANTS.")
    names = register_variants(VARIANTS if args.variants == "all" else
                              {v: VARIANTS[v] for v in args.variants.split(",")})
    methods = parse_methods(names + [m for m in args.baselines.split(",") if m])
    options = parse_options(args.option)
    config = BenchmarkConfig(max_length=args.max_length)  # the ERASER defaults; checked by run_benchmark
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load_model(args.model)
    dataset = dataset_half(load_dataset(args.dataset, "test"), args.half)
    out = Path(args.out or f"benchmarks/results/ablation-{args.dataset}-{args.half}")
    with one_line_warnings("ablation"):
        result = run_benchmark(model, tokenizer, dataset, methods, n=args.n, out_dir=out, config=config,
                               method_options=options, model_name=args.model)
    write_command(out, "captum-prxai ablation", sys.argv[2:] if sys.argv[1:2] == ["ablation"] else sys.argv[1:])
    print(result.files.get("markdown", out))
    return 0
