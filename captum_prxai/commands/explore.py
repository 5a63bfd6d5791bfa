"""``captum-prxai explore``: the local web explorer (Captum Insights for PR-XAI).

Example::

    captum-prxai explore --model default --dataset movie-sentences --port 8765
    captum-prxai explore --model default --model my-base-model    # two models side by side
    captum-prxai explore --decoder smollm2                         # the generation view

Opens a page at http://127.0.0.1:8765/ to browse and filter a dataset's
examples (or type a text), run PR-XAI and baseline attribution methods with
chosen parameters, compare their heatmaps side by side, draw the attention
graph and export the comparison as one HTML file. With ``--decoder`` it
opens the generation view instead: a prompt, its continuation, and the
token x token matrix of :class:`captum_prxai.llm.LLMGraphAttribution`
(``docs/explorer.md``). Needs Flask.
"""

from __future__ import annotations

import argparse

from captum_prxai.exceptions import PRXAIError

HELP = "Open the local web explorer: browse a dataset, compare attribution methods side by side."

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", action="append", default=None,
        help="'default' (embedded MiniLM sentiment model), a local checkpoint folder, "
             "or the name of a model trained with 'captum-prxai train'; repeat it to explain the same text "
             "with several models side by side (default: default)",
    )
    parser.add_argument("--decoder", default=None, metavar="NAME",
                        help="open the generation view for this packaged causal LM "
                             "(captum_prxai.models.decoder.load_decoder, e.g. smollm2) instead of the classifier "
                             "view: type a prompt, see which prompt tokens each generated token comes from")
    parser.add_argument("--dataset", default="movie-sentences",
                        help="dataset shown first; others can be picked in the page (default: %(default)s)")
    parser.add_argument("--split", default="test", choices=("train", "test", "all"),
                        help="dataset split to browse (default: %(default)s)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: %(default)s, this machine only)")
    parser.add_argument("--port", type=int, default=8765, help="port (0: any free port; default: %(default)s)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    parser.add_argument("--max-chars", type=int, default=2000,
                        help="longest text accepted from the page, in characters (default: %(default)s)")
    parser.add_argument("--methods", default=None,
                        help="methods ticked when the page opens (default: the default method, pr-xai, and ig; "
                             "the page shows the featured methods first and the rest under 'More methods')")
    parser.add_argument("--memory-budget-mb", type=float, default=1024.0,
                        help="activation memory one method may use; sets the internal batch size of IG and the "
                             "perturbation methods (default: %(default)s)")
    parser.add_argument("--max-method-seconds", type=float, default=300.0,
                        help="refuse a method estimated to take longer (default: %(default)s)")
    parser.add_argument("--confirm-seconds", type=float, default=20.0,
                        help="ask before starting a job estimated to take longer (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    try:
        import flask  # noqa: F401
    except ImportError:
        raise PRXAIError("the explorer needs Flask, which is not installed. Install it with:\n"
                         "  pip install flask") from None
    if not 0 <= args.port <= 65535:
        raise PRXAIError(f"--port must be between 0 and 65535, got {args.port}.")
    if args.max_chars < 1:
        raise PRXAIError(f"--max-chars must be positive, got {args.max_chars}.")
    for flag in ("memory_budget_mb", "max_method_seconds", "confirm_seconds"):
        value = getattr(args, flag)
        if not value >= 0 or value == float("inf") or (flag != "confirm_seconds" and value == 0):
            raise PRXAIError(f"--{flag.replace('_', '-')} must be a positive number, got {value}.")
    if getattr(args, "decoder", None) is not None:
        if args.model is not None or args.methods is not None:
            raise PRXAIError("--decoder opens the generation view alone; leave out --model and --methods "
                             "(run a second explorer on another --port for the classifier view).")
        return _serve(args, _generation_app(args))
    names = args.model or ["default"]
    if len(set(names)) != len(names):
        raise PRXAIError(f"--model names a model twice: {', '.join(names)}.")

    from captum_prxai.methods import parse_methods
    from captum_prxai.data import list_datasets
    from captum_prxai.explorer import LOOPBACK_HOSTS, create_app
    from captum_prxai.models import load_model

    methods = None if args.methods is None else tuple(parse_methods(args.methods))
    if args.dataset not in list_datasets():
        raise PRXAIError(f"unknown dataset {args.dataset!r}; choose one of: {', '.join(list_datasets())}.")
    loaded = []
    for name in names:
        print(f"loading model {name!r} ...", flush=True)
        loaded.append(load_model(name))
    loopback = args.host in _LOOPBACK
    (model, tokenizer), others = loaded[0], dict(zip(names[1:], loaded[1:]))
    app = create_app(
        model, tokenizer, dataset=args.dataset, split=args.split, model_name=names[0],
        max_chars=args.max_chars, default_methods=methods, allowed_hosts=LOOPBACK_HOSTS if loopback else None,
        memory_budget_mb=args.memory_budget_mb, max_method_seconds=args.max_method_seconds,
        confirm_seconds=args.confirm_seconds, compare=others or None,
    )
    return _serve(args, app)


def _generation_app(args: argparse.Namespace):
    """The generation view's app for ``--decoder`` (the model refused there if it is not a causal LM)."""
    from captum_prxai.explorer import LOOPBACK_HOSTS
    from captum_prxai.explorer.generation import create_generation_app
    from captum_prxai.models import decoder

    print(f"loading decoder {args.decoder!r} ...", flush=True)
    model, tokenizer = decoder.load_decoder(args.decoder)
    return create_generation_app(model, tokenizer, model_name=args.decoder, max_chars=args.max_chars,
                                 allowed_hosts=LOOPBACK_HOSTS if args.host in _LOOPBACK else None)


def _serve(args: argparse.Namespace, app) -> int:
    """Serve ``app`` on ``--host``/``--port`` until Ctrl+C (and open a browser unless ``--no-browser``)."""
    import logging

    from captum_prxai.explorer import make_server

    loopback = args.host in _LOOPBACK
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # startup lines too (make_server logs no request)
    server = make_server(app, args.host, args.port)
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{host}:{server.server_port}/"
    if not loopback:
        print(f"warning: listening on {args.host}: anyone who can reach this address can use the explorer "
              "(and your CPU). Use the default --host 127.0.0.1 to keep it on this machine.")
    print(f"PR-XAI explorer: {url}  (Ctrl+C to stop)", flush=True)
    if not args.no_browser:
        import webbrowser

        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped")
    finally:
        server.server_close()
    return 0
