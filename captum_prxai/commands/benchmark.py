"""``captum-prxai benchmark``: faithfulness of attribution methods on a dataset.

Example::

    captum-prxai benchmark --model default --dataset movie-sentences \\
        --methods pr-ag,pr-a,rollout,ig,random --n 100 --out bench-movies

Writes ``cache.jsonl`` (resumable), ``results.csv``, ``summary.md``,
``summary.json`` and ``deletion_curves.png`` into ``--out``.
"""

from __future__ import annotations

import argparse

from captum_prxai.exceptions import PRXAIError

HELP = "Benchmark attribution methods with ERASER faithfulness metrics (comprehensiveness, sufficiency, AOPC, ...)."

DEFAULT_METHODS = "pr-tag,pr-g,pr-ag,pr-a,raw-attention,rollout,gae,ig,ixg,saliency,random"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="default",
                        help="'default' (embedded MiniLM sentiment model), a local checkpoint folder, or the name "
                             "of a model trained with 'captum-prxai train' (default: %(default)s)")
    parser.add_argument("--dataset", default="movie-sentences",
                        help="dataset name (see 'captum-prxai datasets'); the split comes from --split "
                             "(default: %(default)s)")
    parser.add_argument("--split", default="test", choices=("test", "train", "all"),
                        help="dataset split (default: %(default)s)")
    parser.add_argument("--methods", default=DEFAULT_METHODS,
                        help="comma-separated methods (see --list-methods) (default: %(default)s)")
    parser.add_argument("--n", type=int, default=100,
                        help="number of examples, a seeded random sample of the split (default: %(default)s)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output folder (default: benchmark-<dataset>)")
    parser.add_argument("--mode", choices=("delete", "replace"), default="delete",
                        help="remove tokens by deleting them (ERASER) or replacing them (default: %(default)s)")
    parser.add_argument("--replacement", choices=("mask", "pad"), default="mask",
                        help="token used by --mode replace (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=10, help="deletion-curve steps (default: %(default)s)")
    parser.add_argument("--max-length", type=int, default=None,
                        help="truncate inputs to this many tokens (default: the dataset's suggested length, "
                             "capped by the model's limit)")
    parser.add_argument("--batch-size", type=int, default=64,
                        help="perturbed inputs per forward pass in the metrics (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="example-sampling seed (default: %(default)s)")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cuda if available)")
    parser.add_argument("--option", action="append", default=[], metavar="METHOD.KEY=VALUE",
                        help="method option, e.g. ig.n_steps=20 or shapley.n_samples=10 (value parsed as JSON; "
                             "repeatable)")
    parser.add_argument("--precomputed", action="append", default=[], metavar="NAME=FILE",
                        help="add a method whose token scores were computed elsewhere: a JSON Lines file with "
                             "input_ids and scores per input (repeatable; see "
                             "captum_prxai.methods.register_precomputed); a changed file is recomputed, never read "
                             "from the cache")
    parser.add_argument("--no-resume", action="store_true",
                        help="ignore and overwrite the cache in --out instead of resuming")
    parser.add_argument("--protect-explained", action=argparse.BooleanOptionalAction, default=None,
                        help="never remove the explained (last) token in the metrics; default: on for decoders, "
                             "whose classification head reads that token, off for encoders")
    parser.add_argument("--no-plot", action="store_true", help="do not draw deletion_curves.png")
    parser.add_argument("--quiet", "--no-progress", dest="quiet", action="store_true", help="no progress bar")
    parser.add_argument("--list-methods", action="store_true", help="list the available methods and exit")


def parse_options(items: list[str]) -> dict[str, dict]:
    """``["ig.n_steps=20"]`` -> ``{"ig": {"n_steps": 20}}`` (see :func:`captum_prxai.methods.parse_options`)."""
    from captum_prxai.methods import parse_options as parse

    return parse(items)


def _list_methods() -> int:
    from captum_prxai.methods import METHODS

    width = max(len(n) for n in METHODS)
    family = None
    for spec in METHODS.values():
        if spec.family != family:
            family = spec.family
            print(f"{family}:")
        alias = f" (also: {', '.join(spec.aliases)})" if spec.aliases else ""
        print(f"  {spec.name:<{width}}  {spec.description}{alias}")
    return 0


def _check_numbers(args: argparse.Namespace) -> None:
    """Every numeric flag, before anything is loaded."""
    for flag, value in (("--n", args.n), ("--steps", args.steps), ("--batch-size", args.batch_size),
                        ("--max-length", args.max_length)):
        if value is not None and value < 1:
            raise PRXAIError(f"{flag} must be at least 1, got {value}.")


def run(args: argparse.Namespace) -> int:
    if args.list_methods:
        return _list_methods()
    _check_numbers(args)
    import torch

    from captum_prxai._tokenize import model_input_limit
    from captum_prxai.bench import BenchmarkConfig, run_benchmark
    from captum_prxai.bench.runner import one_line_warnings
    from captum_prxai.commands._output import check_output_dir
    from captum_prxai.data import load_dataset, suggested_max_length
    from captum_prxai.methods import parse_methods, register_precomputed
    from captum_prxai.models import load_model

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise PRXAIError(f"--device {device} requested but CUDA is not available; use --device cpu.")
    for item in args.precomputed:
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path:
            raise PRXAIError(f"--precomputed takes NAME=FILE, got {item!r}.")
        register_precomputed(name.strip(), path, overwrite=True)
    methods = parse_methods(args.methods)
    options = parse_options(args.option)
    config = BenchmarkConfig(mode=args.mode, replacement=args.replacement, steps=args.steps,
                             max_length=args.max_length, seed=args.seed)
    config.validate()
    out = check_output_dir(args.out or f"benchmark-{args.dataset}", "--out")
    dataset = load_dataset(args.dataset, args.split)
    model, tokenizer = load_model(args.model)  # "default" included
    if config.max_length is None:  # the dataset's suggestion, within the model's limit
        try:
            suggested = suggested_max_length(args.dataset)
        except PRXAIError:
            suggested = None
        limit = model_input_limit(model, tokenizer)
        config.max_length = min(suggested, limit) if suggested and limit else (suggested or None)
    with one_line_warnings("captum-prxai benchmark"):
        result = run_benchmark(model, tokenizer, dataset, methods, n=args.n, out_dir=out, config=config,
                               method_options=options, device=device, batch_size=args.batch_size,
                               resume=not args.no_resume, progress=not args.quiet, plot=not args.no_plot,
                               model_name=args.model, protect_explained=args.protect_explained)
    print(result.files["markdown"].read_text(encoding="utf-8"))
    print(f"{result.n_computed} explanations computed, {result.n_cached} read from {result.files['cache']}")
    for kind in ("csv", "markdown", "json", "plot"):
        if kind in result.files:
            print(f"{kind:>8}: {result.files[kind]}")
    if result.errors:
        print(f"{len(result.errors)} explanation(s) failed; first: method {result.errors[0][1]} on example "
              f"{result.errors[0][0]}: {result.errors[0][2]}")
        return 1
    return 0
