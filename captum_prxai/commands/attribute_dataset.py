"""``captum-prxai attribute-dataset``: explain every text of a file or dataset into a Parquet table of scores.

Examples::

    captum-prxai attribute-dataset tickets.csv --text-column body --id-column ticket_id \\
        --methods pr-g,pr-a --output scores/
    captum-prxai attribute-dataset --dataset movie-sentences --split test --output scores/ \\
        --engine ray --actors 2

The output folder holds Parquet shards (``pandas.read_parquet("scores/")``
reads them as one table) and ``_run.json`` with the model and settings. A
rerun of the same command does only what is missing. See ``docs/dataset.md``.
"""

from __future__ import annotations

import argparse

HELP = "Explain every text of a CSV/JSONL/Parquet file or packaged dataset into a Parquet table of token scores."


def _target(value: str):
    if value in ("predicted", "label"):
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'predicted', 'label' or a class index, got {value!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("input")
    src.add_argument("input", nargs="?", help="a .csv, .jsonl or .parquet file with one text per row")
    src.add_argument("--dataset", help="a packaged dataset instead of a file (see 'captum-prxai datasets')")
    src.add_argument("--split", default="test", help="split of --dataset (default: %(default)s)")
    src.add_argument("--text-column", default="text", help="column with the texts (default: %(default)s)")
    src.add_argument("--id-column", help="column with unique ids (default: the row number)")
    src.add_argument("--label-column", help="column with gold labels, as class names or indices (optional)")
    src.add_argument("--encoding", default="utf-8", help="encoding of CSV/JSONL input (default: %(default)s)")
    src.add_argument("--limit", type=int, help="explain only the first N texts (0 or more)")
    src.add_argument("--skip-bad-rows", action="store_true",
                     help="skip (and count) CSV rows with more or fewer fields than the header, instead of "
                          "stopping at the first one")

    what = parser.add_argument_group("attribution")
    what.add_argument("--model", default="default",
                      help="'default' (embedded MiniLM sentiment model), a local checkpoint folder, or the name "
                           "of a model trained with 'captum-prxai train' (default: %(default)s)")
    what.add_argument("--methods", default=None,
                      help="comma-separated methods of the registry (see 'captum-prxai benchmark --list-methods') "
                           "(default: the default method, PageRankAttribution's)")
    what.add_argument("--option", action="append", default=[], metavar="METHOD.KEY=VALUE",
                      help="method option, e.g. --option pr-g.damping=0.5 (repeatable)")
    what.add_argument("--target", type=_target, default="predicted",
                      help="class to explain: 'predicted', 'label' (the gold label) or an index (default: %(default)s)")
    what.add_argument("--long", choices=("truncate", "windows", "skip"), default="truncate",
                      help="texts over the limit: cut them, explain them with stitched sliding windows "
                           "(PR-XAI methods only), or skip them (counted) (default: %(default)s)")
    what.add_argument("--max-length", type=int, help="token limit, special tokens included (default: the model's)")
    what.add_argument("--window-stride", type=int, help="content tokens between window starts (default: half a window)")

    out = parser.add_argument_group("output")
    out.add_argument("--output", "-o", required=True, help="output folder (Parquet or JSONL shards, _run.json)")
    out.add_argument("--format", choices=("parquet", "jsonl"), default="parquet", help="default: %(default)s")
    out.add_argument("--overwrite", action="store_true",
                     help="delete results of other settings in --output instead of stopping")
    out.add_argument("--no-progress", action="store_true", help="no progress bar")

    run_ = parser.add_argument_group("throughput and engines")
    run_.add_argument("--engine", choices=("local", "ray"), default="local",
                      help="local: in this process; ray: Ray Data actor pool (pip install 'captum-prxai[ray]') "
                           "(default: %(default)s)")
    run_.add_argument("--token-budget", type=int, default=8192, help="padded tokens per batch (default: %(default)s)")
    run_.add_argument("--shard-size", type=int, default=256,
                      help="texts per shard, the unit of resumption and of Ray's work (default: %(default)s)")
    run_.add_argument("--flush-seconds", type=float, default=30.0,
                      help="write the rows of an unfinished shard at least this often, so an interrupted run "
                           "loses at most this much work (default: %(default)s)")
    run_.add_argument("--no-bucketing", action="store_true", help="keep input order instead of sorting by length")
    run_.add_argument("--device", default="auto", help="local engine: auto, cpu or cuda (default: %(default)s)")
    run_.add_argument("--threads", type=int, help="local engine: torch threads (default: torch's)")
    run_.add_argument("--actors", type=int, default=1, help="ray: actors, each loading the model once (default: 1)")
    run_.add_argument("--cpus-per-actor", type=int, default=1,
                      help="ray: CPUs per actor, also its torch threads (default: %(default)s)")
    run_.add_argument("--gpus-per-actor", type=float,
                      help="ray: GPUs per actor (default: 1 if the cluster has GPUs, else 0)")
    run_.add_argument("--address", help="ray: cluster to join (default: $RAY_ADDRESS, else start a local one)")


def run(args: argparse.Namespace) -> int:
    from captum_prxai.commands._output import check_output_dir
    from captum_prxai.corpus import attribute_dataset
    from captum_prxai.corpus.worker import method_registry

    check_output_dir(args.output, "--output")
    parse_options = method_registry().parse_options

    result = attribute_dataset(
        args.input, args.output, dataset=args.dataset, split=args.split, text_column=args.text_column,
        id_column=args.id_column, label_column=args.label_column, encoding=args.encoding, limit=args.limit,
        bad_rows="skip" if args.skip_bad_rows else "error",
        model=args.model, methods=args.methods, method_options=parse_options(args.option), target=args.target,
        long=args.long, max_length=args.max_length, window_stride=args.window_stride,
        token_budget=args.token_budget, bucketing=not args.no_bucketing, shard_size=args.shard_size,
        format=args.format, overwrite=args.overwrite, engine=args.engine, device=args.device, threads=args.threads,
        actors=args.actors, cpus_per_actor=args.cpus_per_actor, gpus_per_actor=args.gpus_per_actor,
        address=args.address, progress=not args.no_progress, flush_seconds=args.flush_seconds,
    )
    print(result.summary())
    return 0
