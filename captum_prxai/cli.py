"""The ``captum-prxai`` command line.

Each sub-command lives in its own module under :mod:`captum_prxai.commands`
and exposes ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. Those modules import torch, transformers and friends
inside ``run`` only, so building the parser (and ``captum-prxai --help``)
stays fast. Errors of the :class:`~captum_prxai.exceptions.PRXAIError` kind
print as one line, without a traceback, and exit with status 2; an
:class:`OSError` from the file system prints as one line with status 1. The
line is printed with its control characters escaped
(:func:`~captum_prxai.commands._output.printable`), so a quoted text or path
can neither drive the terminal nor break the line. Options several commands
share (``--device``, ``--window-stride``) are checked here, before any work.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from typing import Sequence

from captum_prxai.exceptions import PRXAIError

#: sub-command name -> module implementing it
COMMANDS: dict[str, str] = {
    "explain": "captum_prxai.commands.explain",
    "datasets": "captum_prxai.commands.datasets",
    "train": "captum_prxai.commands.train",
    "benchmark": "captum_prxai.commands.benchmark",
    "ablation": "captum_prxai.commands.ablation",
    "bench-speed": "captum_prxai.commands.bench_speed",
    "explore": "captum_prxai.commands.explore",
    "attribute-dataset": "captum_prxai.commands.attribute_dataset",
    "explain-generation": "captum_prxai.commands.explain_generation",
}


def _available() -> dict[str, str]:
    return {name: mod for name, mod in COMMANDS.items() if importlib.util.find_spec(mod) is not None}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="captum-prxai",
        description="PR-XAI: PageRank-based feature attribution for transformers (a Captum plugin).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, mod_name in _available().items():
        module = importlib.import_module(mod_name)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def _check_shared_options(args: argparse.Namespace) -> None:
    """Refuse bad values of the options several commands share, before a command starts its work."""
    device = getattr(args, "device", None)
    if isinstance(device, str) and device != "auto":
        from captum_prxai._checks import check_device

        check_device(device)
    stride = getattr(args, "window_stride", None)
    if stride is not None and stride < 1:
        raise PRXAIError(f"--window-stride must be a positive number of tokens, got {stride}; leave it out for the "
                         "default (half a window).")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args._argv = list(sys.argv[1:] if argv is None else argv)  # for a command that reruns itself (train --pin-kernels)
    if not getattr(args, "command", None):
        parser.print_help()
        return 1
    from captum_prxai.commands._output import printable

    try:
        _check_shared_options(args)
        return int(args._run(args) or 0)
    except PRXAIError as err:
        print(f"captum-prxai {args.command}: error: {printable(err, newlines=True)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (``captum-prxai datasets | head -1``): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as err:
        # the file system refused (disk full, permission changed mid-run): one line, not a traceback
        where = f": {err.filename}" if getattr(err, "filename", None) else ""
        print(f"captum-prxai {args.command}: error: {printable(f'{err.strerror or err}{where}')}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
