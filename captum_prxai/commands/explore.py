"""``captum-prxai explore``: the local web explorer (Captum Insights for PR-XAI).

Example::

    captum-prxai explore --model default --dataset movie-sentences --port 8765

Opens a page at http://127.0.0.1:8765/ to browse and filter a dataset's
examples (or type a text), run PR-XAI and baseline attribution methods with
chosen parameters, compare their heatmaps side by side, draw the attention
graph and export the comparison as one HTML file. Needs Flask.
"""

from __future__ import annotations

import argparse

from captum_prxai.exceptions import PRXAIError

HELP = "Open the local web explorer: browse a dataset, compare attribution methods side by side."

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", default="default",
        help="'default' (embedded MiniLM sentiment model), a local checkpoint folder, "
             "or the name of a model trained with 'captum-prxai train' (default: %(default)s)",
    )
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
    parser.add_argument("--methods", default="pr-ag,ig",
                        help="methods ticked when the page opens (default: %(default)s)")


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

    from captum_prxai.bench.methods import parse_methods
    from captum_prxai.data import list_datasets
    from captum_prxai.explorer import LOOPBACK_HOSTS, create_app, make_server
    from captum_prxai.models import load_model

    methods = parse_methods(args.methods)
    if args.dataset not in list_datasets():
        raise PRXAIError(f"unknown dataset {args.dataset!r}; choose one of: {', '.join(list_datasets())}.")
    print(f"loading model {args.model!r} ...", flush=True)
    model, tokenizer = load_model(args.model)
    loopback = args.host in _LOOPBACK
    app = create_app(
        model, tokenizer, dataset=args.dataset, split=args.split, model_name=args.model,
        max_chars=args.max_chars, default_methods=tuple(methods),
        allowed_hosts=LOOPBACK_HOSTS if loopback else None,
    )
    import logging

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request (the page polls)
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
