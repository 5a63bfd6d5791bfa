"""``captum-prxai explain``: explain one prediction with PR-XAI and baseline attributions.

Example::

    captum-prxai explain "a gripping, beautifully shot film" --methods pr-ag,rollout --html why.html

The command loads a sequence classifier (the embedded default, a local
checkpoint folder, or a model trained with ``captum-prxai train``), prints the
prediction and one coloured token line per attribution method, and
optionally writes a standalone HTML comparison page, the scores as JSON, and a
drawing of the graph PageRank ran on for the first PR-XAI method. The work
itself is :func:`captum_prxai.viz.explanation.explain_text`.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from typing import Optional, Sequence

from captum_prxai.commands._output import check_output_file, printable, write_output
from captum_prxai.exceptions import PRXAIError

HELP = "Explain one prediction: PR-XAI token scores in the terminal and as an HTML page."

#: Figure formats of --graph, by file extension
GRAPH_FORMATS = ("png", "svg", "pdf")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", help="the text to classify and explain (quote it)")
    parser.add_argument(
        "--model", default="default",
        help="'default' (embedded MiniLM sentiment model), a local checkpoint folder, "
             "or the name of a model trained with 'captum-prxai train' (default: %(default)s)",
    )
    parser.add_argument(
        "--methods", default=None,
        help="comma-separated attribution methods from the method registry "
             "(pr-g, pr-ag, pr-a, raw-attention, rollout, gae, attention-flow, ig, ixg, saliency, occlusion, "
             "feature-ablation, shapley, kernel-shap, lime, random; see 'captum-prxai benchmark --help') "
             "(default: the PR-XAI methods, the one PageRankAttribution runs by default first)",
    )
    parser.add_argument("--target", type=int, default=None,
                        help="class index to explain (default: the predicted class)")
    parser.add_argument("--html", metavar="PATH", help="write a standalone HTML page comparing the methods")
    parser.add_argument("--json", metavar="PATH", help="write tokens, prediction and scores as JSON")
    parser.add_argument("--graph", metavar="PATH",
                        help="draw the graph PageRank ran on for the first PR-XAI method of --methods "
                             "(nodes sized by its scores) to PATH (.png, .svg or .pdf); with --html it is "
                             "also embedded in the page")
    parser.add_argument("--merge-subwords", action="store_true",
                        help="merge word pieces (##ing) back into words, summing their scores")
    parser.add_argument("--truncate", action="store_true",
                        help="cut texts longer than the model's limit instead of stopping with an error")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the terminal output (auto: when stdout is a terminal and NO_COLOR is unset)")


def parse_methods(spec: str) -> list[str]:
    """Split ``"pr-ag, rollout"`` into registered method names (order kept, aliases resolved, duplicates dropped).

    The methods are those of :mod:`captum_prxai.methods`, so ``explain``
    and ``benchmark`` run exactly the same attributions.

    Raises:
        PRXAIError: for an empty list or an unknown name.
    """
    from captum_prxai.methods import parse_methods as _parse

    return _parse(spec)


def _top_words(tokens: list[str], scores: list[float], merge: bool, unknown: Sequence[int] = (), k: int = 5,
               explained_position: Optional[int] = None) -> str:
    from captum_prxai.viz.tokens import top_words

    top = top_words(tokens, scores, merge, k, explained_position)
    if not top:
        if unknown:
            return f"none: the text's {len(unknown)} token{'s are' if len(unknown) > 1 else ' is'} unknown to the tokenizer ([UNK])"
        return "none: the text has only special tokens"
    return ", ".join(f"{word} {value:.3g}" for word, value in top)


def run(args: argparse.Namespace) -> int:
    import json

    from captum_prxai.viz.explanation import default_methods, explain_text, graph_method

    # everything that can be refused is refused before the model loads
    # without --methods: the model's default first (default_method: by causal attention and depth),
    # once it is loaded
    methods = parse_methods(args.methods) if args.methods is not None else None
    if not args.text or not args.text.strip():
        raise PRXAIError('the text is empty; give the sentence to explain, e.g. captum-prxai explain "a moving film".')
    undecodable = [i for i, char in enumerate(args.text) if 0xD800 <= ord(char) <= 0xDFFF]
    if undecodable:  # bytes the terminal's encoding could not decode reach Python as lone surrogates
        start = max(0, undecodable[0] - 20)
        raise PRXAIError(
            f"the text is not valid in the terminal's encoding ({sys.getfilesystemencoding()}): undecodable byte at "
            f"character {undecodable[0]}, in '{printable(args.text[start:undecodable[0] + 20])}'; pass the text "
            "in UTF-8 (e.g. through iconv -f latin1 -t utf-8)."
        )
    outputs = {"--html": args.html, "--json": args.json, "--graph": args.graph}
    paths = {opt: check_output_file(path, opt, GRAPH_FORMATS if opt == "--graph" else None)
             for opt, path in outputs.items() if path}
    if len({p.resolve() for p in paths.values()}) < len(paths):
        raise PRXAIError(f"{' and '.join(paths)} name the same file; give each its own.")
    if args.graph:
        graph_method(methods if methods is not None else default_methods())
        if importlib.util.find_spec("matplotlib") is None:
            raise PRXAIError("--graph draws with matplotlib, which is not installed; install it with: "
                             "pip install 'captum-prxai[viz]' (or pip install matplotlib).")

    from captum_prxai.models import load_model
    from captum_prxai.viz.html import comparison_page
    from captum_prxai.viz.terminal import terminal_heatmap, terminal_legend

    model, tokenizer = load_model(args.model)
    result = explain_text(args.text, model, tokenizer, methods, target=args.target, truncate=args.truncate,
                          graph=bool(args.graph))

    if args.color == "always":
        color = True
    elif args.color == "never":
        color = False
    else:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")

    labels, probs = result.label_names, result.probabilities
    pred, target = result.predicted, result.target
    print(f"model: {args.model} ({type(model).__name__}; classes: {', '.join(labels)})")
    print(f"prediction: {labels[pred]}  p={probs[pred]:.3f}"
          + (f"   explaining: {labels[target]} (p={probs[target]:.3f})" if target != pred else ""))
    if result.truncated:
        print(f"note: the text was truncated to {len(result.tokens)} tokens")
    if result.all_unknown:
        n = len(result.unknown)
        which = "its only token is" if n == 1 else f"all {n} of its tokens are"
        print(f"note: the tokenizer knows none of the text's words ({which} [UNK]); the scores only say how "
              "the model treats unknown tokens")
    for label, scores in result.scores.items():
        ms = result.seconds[label] * 1000
        print(f"\n{label}  ({ms:.0f} ms)")
        print(terminal_heatmap(result.tokens, scores, merge_subwords=args.merge_subwords, color=color,
                               explained_position=result.explained_position, method=label))
        print(f"  {terminal_legend(scores, method=label, color=color)}")
        print(f"  top: {_top_words(result.tokens, scores, args.merge_subwords, result.unknown, 5, result.explained_position)}")

    if paths:
        print()
    graph_svg = None
    if args.graph:
        from captum_prxai.viz.explanation import graph_title
        from captum_prxai.viz.graph import attention_graph_svg, plot_attention_graph

        adjacency, node_scores = result.graph.adjacency[0], result.graph.scores[0]
        title = graph_title(result.graph_label, result.graph)
        figure = plot_attention_graph(result.tokens, adjacency, node_scores, title=title,
                                      explained_position=result.explained_position, method=result.graph_label)
        fmt = paths["--graph"].suffix.lower().lstrip(".")
        write_output(paths["--graph"], "--graph", lambda path: figure.savefig(path, format=fmt))
        if args.html:
            graph_svg = attention_graph_svg(result.tokens, adjacency, node_scores, title=title,
                                            explained_position=result.explained_position,
                                            method=result.graph_label)
    if args.html:
        page = comparison_page(
            result.tokens, result.scores,
            title=f"Why {labels[target]}? {args.text[:80]}{'...' if len(args.text) > 80 else ''}",
            predicted_label=labels[pred], probability=probs[pred],
            timings=result.seconds, merge_subwords=args.merge_subwords, extra_html=graph_svg,
            explained_position=result.explained_position,
        )
        write_output(paths["--html"], "--html", lambda path: path.write_text(page, encoding="utf-8"))
    if args.json:
        data = json.dumps({**result.to_dict(), "model": args.model, "graph_method": result.graph_label}, indent=2)
        write_output(paths["--json"], "--json", lambda path: path.write_text(data, encoding="utf-8"))
    return 0
