"""``captum-prxai explain-generation``: explain a causal LM's continuation of a prompt, token by token."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

HELP = ("Explain a generated (or given) continuation of a prompt: one row per generated token, scoring the prompt's "
        "tokens; a terminal heatmap, and optionally a standalone HTML token x token view and a JSON file.")

#: ``--method`` choices: registry names of the attention-graph methods LLMGraphAttribution wraps
METHODS = ("pr-xai", "pr-a", "pr-g", "pr-ag", "pr-tag", "raw-attention", "rollout", "gae")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", help="the prompt text")
    parser.add_argument("--target", default=None,
                        help="the continuation to explain (default: generate it greedily)")
    parser.add_argument("--max-new-tokens", type=int, default=10, metavar="N",
                        help="tokens to generate when no --target is given (default: 10)")
    parser.add_argument("--method", default="pr-xai", choices=METHODS,
                        help="the attribution method (default: pr-xai, the library's default)")
    parser.add_argument("--model", default="smollm2",
                        help="packaged decoder to load (captum_prxai.models.decoder.load_decoder; default: smollm2)")
    parser.add_argument("--chat", action="store_true",
                        help="wrap the prompt as a user message in the tokenizer's chat template (its tokens get "
                             "no column)")
    parser.add_argument("--html", default=None, metavar="OUT.html",
                        help="also write a standalone HTML token x token view")
    parser.add_argument("--save", default=None, metavar="OUT.json",
                        help="also save the result (tokens, scores, method, model) as JSON")
    parser.add_argument("--no-color", action="store_true", help="no colours (also: the NO_COLOR variable)")


def _method(name: str, model):
    import captum_prxai as cp

    classes = {"pr-xai": cp.PageRankAttribution, "pr-a": cp.PRAttention, "pr-g": cp.PRGradient,
               "pr-ag": cp.PRAttentionGradient, "pr-tag": cp.PRTemperedAttentionGradient,
               "raw-attention": cp.RawAttention, "rollout": cp.AttentionRollout, "gae": cp.GradientWeightedRollout}
    return classes[name](model, cp.attention_layers(model))


def _check_output(path: str | None, option: str, suffix: str) -> None:
    from captum_prxai.exceptions import PRXAIError

    if path is None:
        return
    parent = Path(path).expanduser().resolve().parent
    if not parent.is_dir():
        raise PRXAIError(f"{option} {path}: the folder {parent} does not exist.")
    if Path(path).suffix.lower() != suffix:
        raise PRXAIError(f"{option} {path}: give a {suffix} file name.")


def run(args: argparse.Namespace) -> int:
    from captum.attr import TextTokenInput

    from captum_prxai.exceptions import PRXAIError
    from captum_prxai.llm import LLMGraphAttribution, chat_input, save_result
    from captum_prxai.models import decoder
    from captum_prxai.viz.generation_html import generation_html
    from captum_prxai.viz.terminal import terminal_heatmap, terminal_legend

    if not args.prompt.strip():
        raise PRXAIError("The prompt is empty; give the text to continue.")
    if args.max_new_tokens < 1:
        raise PRXAIError(f"--max-new-tokens must be at least 1, got {args.max_new_tokens}.")
    if args.target is not None and not args.target.strip():
        raise PRXAIError("--target is empty; leave it out to generate the continuation.")
    _check_output(args.html, "--html", ".html")
    _check_output(args.save, "--save", ".json")
    print(f"loading {args.model} ...", file=sys.stderr, flush=True)
    model, tokenizer = decoder.load_decoder(args.model)
    llm = LLMGraphAttribution(_method(args.method, model), tokenizer, model_name=args.model)
    inp = chat_input([{"role": "user", "content": args.prompt}], tokenizer) if args.chat \
        else TextTokenInput(args.prompt, tokenizer)
    gen_args = None if args.target is not None else {"max_new_tokens": args.max_new_tokens, "do_sample": False}
    with warnings.catch_warnings():  # Captum's display tokens of byte-level BPE: its fallback warns, and is fine
        warnings.filterwarnings("ignore", message=r"\(i=\d+, idx=\d+\)|Pretty tokens length")
        result = llm.attribute(inp, target=args.target, gen_args=gen_args)
    color = False if args.no_color else None
    rows = result.token_attr
    width = max(len(repr(t)) for t in result.output_tokens)
    for k, token in enumerate(result.output_tokens):
        probability = float(result.output_probs[k]) if result.output_probs is not None else float("nan")
        line = terminal_heatmap(list(result.input_tokens), rows[k], method=args.method, color=color)
        print(f"{repr(token).ljust(width)}  p={probability:.2f}  {line}")
    print(terminal_legend(rows.flatten(), method=args.method, color=color))
    if args.html:
        Path(args.html).write_text(generation_html(result.input_tokens, result.output_tokens, rows,
                                                   method=args.method, model_name=args.model), encoding="utf-8")
        print(f"wrote {args.html}", file=sys.stderr)
    if args.save:
        save_result(result, args.save)
        print(f"wrote {args.save}", file=sys.stderr)
    return 0
