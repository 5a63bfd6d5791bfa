"""Our side of the ferret cross-check: benchmark one cell, export the model and the scores for ferret.

Runs in the project's own venv. For one cell (architecture x dataset) it

1. runs :func:`captum_prxai.bench.runner.run_benchmark` (the benchmark itself: the method registry's
   scores and :func:`captum_prxai.metrics.evaluate_faithfulness`, ERASER comprehensiveness and
   sufficiency over the bins 1/5/10/20/50%, removal by deletion) on the holdout half of the test split,
   ``n`` examples (``select_examples(len, n, seed)``), into ``<out>/ours/`` (resumable: its
   ``cache.jsonl`` is reused on a rerun);
2. saves the model (``save_pretrained``) and its tokenizer to ``--model-dir`` for the ferret venv;
3. writes ``<out>/examples.jsonl``: one line per example with ``example``, ``text``, ``input_ids``,
   ``special_tokens_mask``, ``tokens``, ``label``, ``target`` (the class the benchmark explains: the
   predicted one), ``prob`` and, per method, its ``scores`` (one per token, special tokens included)
   and our per-example metric values; ``explained_position``, the decoder's explained last token that
   our metrics keep in every perturbed input (``None`` for encoders); ``default_method``, the registry name of
   the method ``PageRankAttribution()`` runs on this model by default (``research_methods.research_default``).

``--methods`` may name ``default``: the model's default method, resolved the same way.
"""
import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the benchmarks' own modules
from research_methods import register_research_methods, research_default  # noqa: E402

register_research_methods()  # the research variants the tables name (idempotent)

torch.set_num_threads(1)

from captum_prxai.bench.ablation import dataset_half
from captum_prxai.bench.runner import (
    encode_text,
    resolve_max_length,
    resolve_protect_explained,
    run_benchmark,
    select_examples,
)
from captum_prxai.data import load_dataset
from captum_prxai.models import load_default, load_model

#: ``default``: the model's own default, by architecture (``research_methods.research_default``; the committed
#: cross-check ran with the defaults of 2026-12-06 on all three cells, each on the class's log-probability, before the
#: seventeenth round's encoder default, which it has not been rerun with)
METHODS = "default,pr-tag,pr-tag-pm,pr-g,pr-ag,gae,ig,random"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--model", required=True, help='model name for load_model, or "default"')
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--methods", default=METHODS)
    p.add_argument("--out", required=True, help="result folder of the cell")
    p.add_argument("--model-dir", required=True, help="where to save the model for the ferret venv")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    model, tok = load_default() if a.model == "default" else load_model(a.model)
    model.eval()
    data = dataset_half(load_dataset(a.dataset, "test"), "holdout")
    out = Path(a.out)
    default = research_default(model)
    names = list(dict.fromkeys(default if m.strip() == "default" else m.strip() for m in a.methods.split(",")))
    res = run_benchmark(model, tok, data, names, n=a.n, out_dir=out / "ours", model_name=a.model,
                        seed=a.seed, plot=False, progress=False)
    if res.errors:
        raise SystemExit(f"{len(res.errors)} explanations failed: {res.errors[:3]}")

    Path(a.model_dir).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(a.model_dir)
    tok.save_pretrained(a.model_dir)

    max_length = resolve_max_length(None, model, tok)
    # run_benchmark's own rule: a decoder's explained (last real) token stays in every perturbed input
    protected = resolve_protect_explained(None, model)
    by_example = {}
    for r in res.records:
        by_example.setdefault(r["example"], {})[r["method"]] = r
    idx = select_examples(len(data.texts), a.n, a.seed)
    assert sorted(by_example) == idx, "benchmark examples differ from select_examples"
    with open(out / "examples.jsonl", "w") as f:
        for i in idx:
            enc = encode_text(tok, data.texts[i], max_length, torch.device("cpu"))
            recs = by_example[i]
            first = next(iter(recs.values()))
            assert first["tokens"] == enc.tokens, f"tokens of example {i} differ from the benchmark's"
            methods = {}
            for name in res.methods:
                r = recs[name]
                assert len(r["scores"]) == enc.ids.shape[1]
                methods[name] = {"scores": r["scores"],
                                 **{k: v for k, v in r["metrics"].items()
                                    if k.startswith(("comprehensiveness", "sufficiency"))}}
            f.write(json.dumps({"example": i, "text": data.texts[i], "input_ids": enc.ids[0].tolist(),
                                "special_tokens_mask": enc.special[0].tolist(), "tokens": enc.tokens,
                                "label": first["label"], "target": first["target"], "prob": first["prob"],
                                "max_length": max_length, "methods": methods, "default_method": default,
                                "explained_position": enc.ids.shape[1] - 1 if protected else None}) + "\n")
    print(f"wrote {len(idx)} examples x {len(res.methods)} methods to {out / 'examples.jsonl'}; "
          f"model ({type(model).__name__}, pad_token_id={model.config.pad_token_id}) to {a.model_dir}")


if __name__ == "__main__":
    main()
