"""AttnLRP (lxt) rows for the generation benchmark: relevance of each prompt token for each output token.

Runs in the SEPARATE venv /work/lxt-venv (lxt 2.1, transformers 4.52.4, torch 2.13.0+cpu), not in the
project's venv: see README.md beside this file, section "Generation". Input: the work folder written by
``generation_export.py`` (project venv): ``model/``, ``prompts.jsonl`` and ``logits.pt``.

The architecture comes from ``model/config.json``: ``llama`` (SmolLM2: ``LlamaForCausalLM``) with lxt's
``modeling_llama`` rules, or ``gemma3_text`` (Gemma 3 270M: ``Gemma3ForCausalLM``) with lxt's
``modeling_gemma3`` rules (lxt 2.1's ``lxt.efficient.models`` has AttnLRP files for llama, qwen2, qwen3,
gemma3, bert, gpt2 and the torchvision ViT). Anything else stops with an error.

Recipe (lxt's efficient implementation, as in its README, under teacher forcing):
  monkey_patch(modeling_<arch>)                       # AttnLRP rules via Gradient*Input
  embeds = embed(prompt + target[:-1]).requires_grad_()
  logits = model(inputs_embeds=embeds, use_cache=False).logits[0]
  for k in range(n_out):                              # one backward per output token
      grad = d logits[n_in - 1 + k, target[k]] / d embeds
      row_k = (embeds * grad).sum(-1)[:n_in]          # relevance of the prompt tokens for t_k

Row k is the relevance of the prompt tokens (BOS and template tokens included: the benchmark never
deletes those, and ranks only the others) for the logit of t_k; the relevance that reaches the
teacher-forced tokens t_<k is not part of the row and is recorded as ``relevance_generated``.

Output (``--out``), one JSON line per prompt: the fields ``benchmarks/generation.py``'s ``Precomputed``
reads (model, source, half, example, text_sha, input_ids, target, rows, cpu_s), the ``config_key`` of the
prompt's ``_target`` record (it names the weights; ``--resume`` keeps a line only under the same key,
attention, ids and continuation), and the checks:
``logit_diff`` (max |lxt logits - ours| over the vocabulary at the explained positions), ``argmax_ok``
(lxt's argmax there is the continuation), ``target_logits`` (lxt's logit of t_k), ``relevance_prompt`` and
``relevance_generated`` (per row: the relevance summed over the prompt, over t_<k), ``finite``, ``attn``,
``wall_s``. ``cpu_s`` is the process time of the forward and the n_out backwards (one thread).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # attnlrp_scores.py, beside this file

from attnlrp_scores import _stub_torchvision_if_broken  # noqa: E402  (also sets one thread)

import transformers  # noqa: E402

torch.set_num_threads(1)


def load_patched_lm(model_dir: str, attn: str):
    """lxt-patched causal LM for the architecture in ``model_dir/config.json``: ``(model, description)``."""
    import lxt  # noqa: F401
    from lxt.efficient import monkey_patch
    from lxt.efficient.models import DEFAULT_MAP

    with open(os.path.join(model_dir, "config.json")) as f:
        model_type = json.load(f)["model_type"]
    if model_type == "llama":
        import transformers.models.llama.modeling_llama as modeling

        monkey_patch(modeling, verbose=True)
        model = modeling.LlamaForCausalLM.from_pretrained(model_dir, attn_implementation=attn,
                                                          torch_dtype=torch.float32)
        patched = (modeling.eager_attention_forward, modeling.LlamaRMSNorm.forward, modeling.LlamaMLP.forward)
    elif model_type in ("gemma3_text", "gemma3"):
        import transformers.models.gemma3.modeling_gemma3 as modeling

        monkey_patch(modeling, verbose=True)
        model = modeling.Gemma3ForCausalLM.from_pretrained(model_dir, attn_implementation=attn,
                                                           torch_dtype=torch.float32)
        patched = (modeling.eager_attention_forward, modeling.Gemma3RMSNorm._norm, modeling.Gemma3MLP.forward)
    else:
        supported = ", ".join(m.__name__.rsplit(".", 1)[-1] for m in DEFAULT_MAP)
        raise SystemExit(f"lxt {getattr(lxt, '__version__', '2.1')} has no AttnLRP rules for causal LM model_type "
                         f"{model_type!r} here; lxt.efficient.models.DEFAULT_MAP covers: {supported}")
    for fn in patched:
        if not fn.__module__.startswith("lxt.efficient"):
            raise SystemExit(f"{model_type} not patched by lxt: {fn.__qualname__} is from {fn.__module__}")
    model.eval()
    return model, f"{type(model).__name__}, attention {model.config._attn_implementation} (wrapped by lxt)"


def score_prompt(model, embed, line: dict, ours: torch.Tensor) -> dict:
    """The rows and checks of one prompt (see the module docstring)."""
    prompt, target = line["input_ids"], line["target"]
    n_in, n_out = len(prompt), len(target)
    ids = torch.tensor([prompt + target[:-1]])
    positions = torch.tensor(line["positions"])
    if positions.tolist() != list(range(n_in - 1, n_in - 1 + n_out)):
        raise SystemExit(f"{line['source']}/{line['half']}/{line['example']}: unexpected positions")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    embeds = embed(ids).detach().requires_grad_()
    logits = model(inputs_embeds=embeds, attention_mask=torch.ones_like(ids), use_cache=False).logits[0]
    picked = logits[positions, torch.tensor(target)]
    rels = []
    for k in range(n_out):
        (grad,) = torch.autograd.grad(picked[k], embeds, retain_graph=k < n_out - 1)
        rels.append((embeds.detach() * grad).sum(-1)[0])
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    rel = torch.stack(rels)  # (n_out, n_in + n_out - 1)
    rows = rel[:, :n_in]
    at = logits[positions].detach().float()
    return {
        "model": line["model"], "source": line["source"], "half": line["half"], "example": line["example"],
        "text_sha": line["text_sha"], "config_key": line["config_key"], "input_ids": prompt, "target": target,
        "rows": [[float(v) for v in row] for row in rows],
        "cpu_s": cpu, "wall_s": wall,
        "logit_diff": float((at - ours).abs().max()),
        "argmax_ok": at.argmax(-1).tolist() == target,
        "target_logits": picked.detach().tolist(),
        "relevance_prompt": rows.sum(1).tolist(),
        "relevance_generated": rel[:, n_in:].sum(1).tolist(),
        "finite": bool(torch.isfinite(rel).all()),
    }


def summary(records: list, desc: str, versions: str, attn: str) -> str:
    """The checks of a scores file, as Markdown."""
    diffs = [r["logit_diff"] for r in records]
    ratio = [(p + g) / t for r in records for p, g, t in
             zip(r["relevance_prompt"], r["relevance_generated"], r["target_logits"]) if t]
    share = [g / (p + g) for r in records for p, g in zip(r["relevance_prompt"], r["relevance_generated"]) if p + g]
    cells = {}
    for r in records:
        cells.setdefault((r["source"], r["half"]), []).append(r)
    lines = ["# AttnLRP (lxt) rows for the generation benchmark: checks", "",
             f"{versions}; {desc}; `--attn {attn}`.", "",
             f"- Prompts: {len(records)} ({', '.join(f'{s}/{h} {len(v)}' for (s, h), v in sorted(cells.items()))}); "
             f"rows: {sum(len(r['rows']) for r in records)}.",
             f"- lxt's logits against the project's on the same ids (explained positions, whole vocabulary): "
             f"max |difference| {max(diffs):.2e}, median {statistics.median(diffs):.2e}.",
             f"- lxt's argmax is the benchmark's continuation at every explained position on "
             f"{sum(r['argmax_ok'] for r in records)} of {len(records)} prompts.",
             f"- Finite rows: {sum(r['finite'] for r in records)} of {len(records)} prompts.",
             f"- Conservation: relevance on the input (prompt + teacher-forced tokens) / the target logit, over rows: "
             f"median {statistics.median(ratio):.3f}, quartiles {statistics.quantiles(ratio, n=4)[0]:.3f} / "
             f"{statistics.quantiles(ratio, n=4)[2]:.3f}.",
             f"- Share of that relevance on the teacher-forced tokens t_<k (not in the rows): median "
             f"{statistics.median(share):.3f}.",
             f"- CPU per prompt (forward + {len(records[0]['target'])} backwards, one thread): mean "
             f"{statistics.mean(r['cpu_s'] for r in records):.2f} s, max {max(r['cpu_s'] for r in records):.2f} s.", ""]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", required=True, help="the folder written by generation_export.py")
    p.add_argument("--out", required=True, help="scores.jsonl")
    p.add_argument("--summary", default=None, help="also write the checks to this Markdown file")
    p.add_argument("--attn", default="eager", choices=("eager", "sdpa"))
    p.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    p.add_argument("--resume", action="store_true",
                   help="keep the lines of an existing --out made with the same attention on the same prompt, "
                        "ids and continuation of the same weights (the _target record's config_key); score the "
                        "others")
    a = p.parse_args()

    tv = _stub_torchvision_if_broken()
    import lxt

    model, desc = load_patched_lm(os.path.join(a.work, "model"), a.attn)
    versions = (f"torch {torch.__version__}, transformers {transformers.__version__}, "
                f"lxt {getattr(lxt, '__version__', '2.1')}")
    print(f"{versions}, torchvision {tv}; {desc}", file=sys.stderr)
    lines = [json.loads(t) for t in open(os.path.join(a.work, "prompts.jsonl")) if t.strip()]
    if a.limit is not None:
        lines = lines[: a.limit]
    ours = torch.load(os.path.join(a.work, "logits.pt"))
    embed = model.get_input_embeddings()
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)

    def same(line: dict) -> tuple:
        return (line["source"], line["half"], line["example"], line["text_sha"], line.get("config_key"),
                tuple(line["input_ids"]), tuple(line["target"]))

    kept = {}
    if a.resume and os.path.isfile(a.out):
        kept = {same(r): r for r in map(json.loads, filter(str.strip, open(a.out))) if r.get("attn") == a.attn}
    records = []
    with open(a.out, "w") as f:
        for i, line in enumerate(lines):
            rec = kept.get(same(line))
            if rec is None:
                rec = score_prompt(model, embed, line, ours[f"{line['source']}/{line['half']}/{line['example']}"])
                rec["attn"] = a.attn
            records.append(rec)
            f.write(json.dumps(rec) + "\n")
            f.flush()
            print(f"{i + 1}/{len(lines)} {rec['source']}/{rec['half']} #{rec['example']}: n_in {len(rec['input_ids'])}"
                  f" logit_diff {rec['logit_diff']:.1e} cpu {rec['cpu_s']:.2f}s", file=sys.stderr)
    if a.summary:
        with open(a.summary, "w") as f:
            f.write(summary(records, desc, versions, a.attn))
    bad = [r for r in records if not r["finite"] or not math.isfinite(r["logit_diff"])]
    print(f"wrote {len(records)} prompts to {a.out}" + (f"; {len(bad)} not finite" if bad else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
