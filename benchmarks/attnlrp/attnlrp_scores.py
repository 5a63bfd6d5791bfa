"""AttnLRP (lxt, "LRP eXplains Transformers") token relevances for an exported BERT classifier.

Runs in the SEPARATE venv /work/lxt-venv (lxt 2.1, transformers 4.52.4, torch 2.13.0+cpu), not in
the project's venv: see README.md beside this file. Input: the examples file written by
export_examples.py (project venv) and the merged model directory it saved.

Recipe (lxt's efficient implementation, as in its README):
  monkey_patch(transformers.models.bert.modeling_bert)  # AttnLRP rules via Gradient*Input
  embeds = word_embeddings(input_ids).requires_grad_()
  logits = model(inputs_embeds=embeds).logits
  logits[0, target].backward()
  relevance = (embeds * embeds.grad).sum(-1)             # one score per token

target = argmax of the project's stored logits (the project model's predicted class).

Per example it also records: logit_diff (max |lxt logits - project logits|), relevance_sum (sum of
the token scores, i.e. relevance on the word embeddings), relevance_sum_embeddings (relevance on the
full embedding input word + position + token-type, taken at the input of the embedding LayerNorm),
target_logit, and time_s (forward + backward, one thread).
"""
import argparse
import importlib.machinery
import json
import math
import os
import sys
import time
import types

import torch

torch.set_num_threads(1)

import transformers  # noqa: E402  (must be imported before the torchvision stub below)
import transformers.models.bert.modeling_bert as modeling_bert  # noqa: E402


def _stub_torchvision_if_broken() -> str:
    """lxt.efficient imports ``torchvision.models.vision_transformer`` (for its ViT patch map) even
    for BERT. The PyPI torchvision wheel is a CUDA build whose ops fail to load against the CPU
    torch 2.13.0 wheel ("operator torchvision::nms does not exist"), so the lxt venv has no
    torchvision; this stub only lets lxt's model table import. Nothing of it is used for BERT."""
    try:
        import torchvision.models.vision_transformer  # noqa: F401
        return "real"
    except Exception as exc:  # ModuleNotFoundError, or RuntimeError from a mismatched wheel
        mods = {}
        for name in ("torchvision", "torchvision.models", "torchvision.models.vision_transformer"):
            mods[name] = types.ModuleType(name)
            mods[name].__spec__ = importlib.machinery.ModuleSpec(name, None)
        mods["torchvision"].models = mods["torchvision.models"]
        mods["torchvision.models"].vision_transformer = mods["torchvision.models.vision_transformer"]
        mods["torchvision.models.vision_transformer"].nn = torch.nn
        sys.modules.update(mods)
        return f"stub ({type(exc).__name__}: {exc})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", default="/tmp/prxai-attnlrp-examples.jsonl")
    p.add_argument("--model-dir", default="/tmp/prxai-default-merged")
    p.add_argument("--out", required=True)
    p.add_argument("--attn", default="eager", choices=("eager", "sdpa"),
                   help="lxt patches both BERT attention classes; eager is the plain matmul path")
    p.add_argument("--limit", type=int, default=None, help="only the first N examples")
    a = p.parse_args()

    tv = _stub_torchvision_if_broken()
    import lxt
    from lxt.efficient import monkey_patch

    monkey_patch(modeling_bert, verbose=True)
    model = modeling_bert.BertForSequenceClassification.from_pretrained(a.model_dir, attn_implementation=a.attn)
    model.eval()
    attn_cls = type(model.bert.encoder.layer[0].attention.self)
    assert attn_cls.__module__ == "lxt.efficient.models.bert", f"BERT not patched: {attn_cls}"
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"lxt {getattr(lxt, '__version__', 'n/a')}, torchvision {tv}; attention {attn_cls.__name__}",
          file=sys.stderr)

    # Capture the input of the embedding LayerNorm (word + position + token-type embeddings).
    captured = {}

    def _pre_hook(_module, args):
        x = args[0]
        x.retain_grad()
        captured["x"] = x

    model.bert.embeddings.LayerNorm.register_forward_pre_hook(_pre_hook)

    examples = [json.loads(line) for line in open(a.examples)]
    if a.limit is not None:
        examples = examples[: a.limit]
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    embed = model.get_input_embeddings()
    with open(a.out, "w") as f:
        for e in examples:
            ids = torch.tensor([e["input_ids"]])
            ours = torch.tensor(e["logits"])
            target = int(ours.argmax())
            t0 = time.perf_counter()
            embeds = embed(ids).detach().requires_grad_()
            logits = model(inputs_embeds=embeds, attention_mask=torch.ones_like(ids)).logits
            logits[0, target].backward()
            rel = (embeds * embeds.grad).sum(-1)[0]
            elapsed = time.perf_counter() - t0
            x = captured.pop("x")
            rel_all = float((x.detach() * x.grad).sum())
            scores = [float(v) for v in rel.detach()]
            rec = {
                "example": e["example"],
                "input_ids": e["input_ids"],
                "label": e.get("label"),
                "target": target,
                "scores": scores,
                "logit_diff": float((logits[0].detach() - ours).abs().max()),
                "relevance_sum": float(rel.detach().sum()),
                "relevance_sum_embeddings": rel_all,
                "target_logit": float(logits[0, target].detach()),
                "finite": all(math.isfinite(s) for s in scores),
                "time_s": elapsed,
            }
            f.write(json.dumps(rec) + "\n")
    print(f"wrote {len(examples)} records to {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
