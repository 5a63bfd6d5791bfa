"""``captum-prxai explain``: explain one prediction with PR-XAI and baseline attributions.

Example::

    captum-prxai explain "a gripping, beautifully shot film" --methods pr-ag,rollout --html why.html

The command loads a sequence classifier (the embedded default, a local
checkpoint folder, or a model trained with ``captum-prxai train``), prints the
prediction and one coloured token line per attribution method, and
optionally writes a standalone HTML comparison page, the scores as JSON, and a
drawing of the attention graph.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from captum_prxai._limits import encode_text, max_input_length
from captum_prxai.exceptions import PRXAIError

HELP = "Explain one prediction: PR-XAI token scores in the terminal and as an HTML page."


DEFAULT_METHODS = "pr-ag,pr-a,pr-g"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", help="the text to classify and explain (quote it)")
    parser.add_argument(
        "--model", default="default",
        help="'default' (embedded MiniLM sentiment model), a local checkpoint folder, "
             "or the name of a model trained with 'captum-prxai train' (default: %(default)s)",
    )
    parser.add_argument(
        "--methods", default=DEFAULT_METHODS,
        help="comma-separated attribution methods from the benchmark registry "
             "(pr-ag, pr-a, pr-g, raw-attention, rollout, gae, attention-flow, ig, ixg, saliency, occlusion, feature-ablation, "
             "shapley, kernel-shap, lime, random; see 'captum-prxai benchmark --help') (default: %(default)s)",
    )
    parser.add_argument("--target", type=int, default=None,
                        help="class index to explain (default: the predicted class)")
    parser.add_argument("--html", metavar="PATH", help="write a standalone HTML page comparing the methods")
    parser.add_argument("--json", metavar="PATH", help="write tokens, prediction and scores as JSON")
    parser.add_argument("--graph", metavar="PATH",
                        help="draw the attention x gradient graph (mean over layers, nodes sized by PR-AG) "
                             "to PATH (.png, .svg or .pdf); with --html it is also embedded in the page")
    parser.add_argument("--merge-subwords", action="store_true",
                        help="merge word pieces (##ing) back into words, summing their scores")
    parser.add_argument("--truncate", action="store_true",
                        help="cut texts longer than the model's limit instead of stopping with an error")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the terminal output (auto: when stdout is a terminal and NO_COLOR is unset)")


def parse_methods(spec: str) -> list[str]:
    """Split ``"pr-ag, rollout"`` into registered method names (order kept, aliases resolved, duplicates dropped).

    The methods are those of :mod:`captum_prxai.bench.methods`, so ``explain``
    and ``benchmark`` run exactly the same attributions.

    Raises:
        PRXAIError: for an empty list or an unknown name.
    """
    from captum_prxai.bench.methods import parse_methods as _parse

    return _parse(spec)


def _model_limit(model: Any, tokenizer: Any) -> int | None:
    """Longest input (in tokens, special tokens included) the model accepts."""
    return max_input_length(getattr(model, "config", None), tokenizer)


def _load(model_arg: str):
    from captum_prxai.models import load_default, load_model

    if model_arg == "default":
        return load_default()
    return load_model(model_arg)


def explain_text(
    text: str,
    model: Any,
    tokenizer: Any,
    methods: list[str],
    *,
    target: int | None = None,
    truncate: bool = False,
) -> dict[str, Any]:
    """Classify ``text`` and run each attribution method on it.

    Returns:
        A dict with ``tokens``, ``label_names``, ``probabilities``,
        ``predicted`` (index), ``target`` (index explained), ``truncated``
        (bool), ``scores`` (method name -> list of floats, one per token) and
        ``seconds`` (method name -> wall time).

    Raises:
        PRXAIError: empty text, text too long (without ``truncate``), target
            out of range, unknown method.
    """
    import time

    import torch

    if not text or not text.strip():
        raise PRXAIError('the text is empty; give the sentence to explain, e.g. captum-prxai explain "a moving film".')
    encoded = encode_text(
        tokenizer, text, _model_limit(model, tokenizer), truncate,
        lambda length, limit: PRXAIError(
            f"the text has {length} tokens but this model accepts at most {limit}; shorten it, "
            "or pass --truncate to explain only its first tokens."
        ),
    )
    input_ids, attention_mask, special, tokens, truncated = encoded[:5]

    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    probs = torch.softmax(logits.double(), -1)[0]
    classes = probs.shape[0]
    predicted = int(probs.argmax())
    if target is None:
        target = predicted
    if not 0 <= target < classes:
        raise PRXAIError(f"--target {target} is out of range: this model has {classes} classes (0..{classes - 1}).")
    id2label = getattr(model.config, "id2label", None) or {}
    label_names = [str(id2label.get(i, id2label.get(str(i), f"class {i}"))) for i in range(classes)]

    from captum_prxai.bench.methods import MethodContext, build_method, make_forward_func

    forward_func = make_forward_func(model)
    context = MethodContext.from_tokenizer(tokenizer)
    target_tensor = torch.tensor([target])
    scores: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    for name in methods:
        explainer = build_method(name, model, forward_func, context)
        start = time.perf_counter()
        out = explainer(input_ids, attention_mask, special, target_tensor)
        seconds[explainer.label] = time.perf_counter() - start
        scores[explainer.label] = [float(v) for v in out[0].tolist()]
    return {
        "text": text,
        "tokens": tokens,
        "label_names": label_names,
        "probabilities": [float(p) for p in probs.tolist()],
        "predicted": predicted,
        "target": target,
        "truncated": truncated,
        "scores": scores,
        "seconds": seconds,
    }


def _top_words(tokens: list[str], scores: list[float], merge: bool, k: int = 5) -> str:
    from captum_prxai.viz.tokens import display_token, is_special_token, merge_subwords

    if merge:
        words, values, _ = merge_subwords(tokens, scores)
    else:
        words, values = [display_token(t) for t in tokens], scores
    order = [i for i in sorted(range(len(values)), key=lambda i: -abs(values[i])) if not is_special_token(words[i])]
    return ", ".join(f"{words[i]} {values[i]:.3g}" for i in order[:k])


def _graph_inputs(result: dict[str, Any], model: Any, input_ids: Any, attention_mask: Any):
    """Mean-over-layers attention x gradient graph (positive part per head) and the node scores to show."""
    import torch

    import captum_prxai
    from captum_prxai.hooks import AttentionRecorder

    layers = captum_prxai.attention_layers(model)

    def keep(layer, attention, grad):
        return (attention * grad).clamp(min=0).mean(1)

    recorder = AttentionRecorder(layers, keep, with_gradients=True)
    with torch.enable_grad(), recorder:
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        recorder.backward(logits[0, result["target"]])
    adjacency = torch.stack([m[0] for m in recorder.collected()]).mean(0).detach()
    name = "PR-AG" if "PR-AG" in result["scores"] else next(iter(result["scores"]))
    return adjacency, result["scores"][name], name


GRAPH_TITLE = "attention x gradient, mean over layers (edge i -> j: token i attends to j); nodes: {name}"


def run(args: argparse.Namespace) -> int:
    import json
    import os
    from pathlib import Path

    methods = parse_methods(args.methods)
    if not args.text or not args.text.strip():
        raise PRXAIError('the text is empty; give the sentence to explain, e.g. captum-prxai explain "a moving film".')

    import torch

    from captum_prxai.viz.html import comparison_page
    from captum_prxai.viz.terminal import terminal_heatmap

    model, tokenizer = _load(args.model)
    result = explain_text(args.text, model, tokenizer, methods, target=args.target, truncate=args.truncate)

    if args.color == "always":
        color = True
    elif args.color == "never":
        color = False
    else:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")

    labels, probs = result["label_names"], result["probabilities"]
    pred, target = result["predicted"], result["target"]
    print(f"model: {args.model} ({type(model).__name__}; classes: {', '.join(labels)})")
    print(f"prediction: {labels[pred]}  p={probs[pred]:.3f}"
          + (f"   explaining: {labels[target]} (p={probs[target]:.3f})" if target != pred else ""))
    if result["truncated"]:
        print(f"note: the text was truncated to {len(result['tokens'])} tokens")
    for label, scores in result["scores"].items():
        ms = result["seconds"][label] * 1000
        print(f"\n{label}  ({ms:.0f} ms)")
        print(terminal_heatmap(result["tokens"], scores, merge_subwords=args.merge_subwords, color=color))
        print(f"  top: {_top_words(result['tokens'], scores, args.merge_subwords)}")

    if args.graph or args.html or args.json:
        print()
    graph_svg = None
    if args.graph:
        from captum_prxai.viz.graph import attention_graph_svg, plot_attention_graph

        encoded = tokenizer(args.text, return_tensors="pt", truncation=result["truncated"],
                            max_length=len(result["tokens"]) if result["truncated"] else None)
        mask = encoded.get("attention_mask", torch.ones_like(encoded["input_ids"]))
        adjacency, node_scores, node_name = _graph_inputs(result, model, encoded["input_ids"], mask)
        lower = args.graph.lower()
        fmt = "svg" if lower.endswith(".svg") else "pdf" if lower.endswith(".pdf") else "png"
        Path(args.graph).parent.mkdir(parents=True, exist_ok=True)
        title = GRAPH_TITLE.format(name=node_name)
        plot_attention_graph(result["tokens"], adjacency, node_scores, path=args.graph, fmt=fmt, title=title)
        if args.html:
            graph_svg = attention_graph_svg(result["tokens"], adjacency, node_scores, title=title)
        print(f"wrote {args.graph}")
    if args.html:
        page = comparison_page(
            result["tokens"], result["scores"],
            title=f"Why {labels[target]}? {args.text[:80]}{'...' if len(args.text) > 80 else ''}",
            predicted_label=labels[pred], probability=probs[pred],
            timings=result["seconds"], merge_subwords=args.merge_subwords, extra_html=graph_svg,
        )
        path = Path(args.html)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
        print(f"wrote {path}")
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**result, "model": args.model}, indent=2), encoding="utf-8")
        print(f"wrote {path}")
    return 0
