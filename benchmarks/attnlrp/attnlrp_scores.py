"""AttnLRP (lxt, "LRP eXplains Transformers") token relevances for an exported classifier.

Runs in the SEPARATE venv /work/lxt-venv (lxt 2.1, transformers 4.52.4, torch 2.13.0+cpu), not in
the project's venv: see README.md beside this file. Input: the examples file written by
export_examples.py (project venv) and the model directory it saved. The architecture is read from
the model's config.json: ``bert`` (BertForSequenceClassification: MiniLM) or ``llama``
(LlamaForSequenceClassification: SmolLM2, head on the last non-padding token) with lxt's own rules,
or ``mpnet`` (MPNetForSequenceClassification) with lxt's rules applied to ``modeling_mpnet`` by
``mpnet_rules.py`` (lxt 2.1 has AttnLRP files, ``lxt.efficient.models``, only for llama, qwen2,
qwen3, gemma3, bert, gpt2 and the torchvision ViT). Anything else stops with an error.

Recipe (lxt's efficient implementation, as in its README):
  monkey_patch(transformers.models.<arch>.modeling_<arch>)  # AttnLRP rules via Gradient*Input
  embeds = word_embeddings(input_ids).requires_grad_()
  logits = model(inputs_embeds=embeds).logits
  logits[0, target].backward()
  relevance = (embeds * embeds.grad).sum(-1)             # one score per token

target = argmax of the project's stored logits (the project model's predicted class).

Per example it also records: logit_diff (max |lxt logits - project logits|), relevance_sum (sum of
the token scores, i.e. relevance on the word embeddings), relevance_sum_embeddings (BERT: relevance
on the full embedding input word + position + token-type, taken at the input of the embedding
LayerNorm; MPNet: word + position, at the same place; Llama: the word embeddings are the whole input (rotary positions), so it equals
relevance_sum), layer_relevance (activation x gradient summed at each of the model's hidden states,
``output_hidden_states``: BERT [embedding output, layer 0 .. L-1 outputs]; Llama [input embeddings,
layer 0 .. L-2 outputs, final-norm output]), head_position (the token the classification head
reads: BERT 0, the [CLS] token of the pooler; Llama the last non-padding token), target_logit, and time_s (forward + backward, one thread).
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
import transformers.models.llama.modeling_llama as modeling_llama  # noqa: E402


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


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # mpnet_rules.py, beside this file


def load_patched(model_dir: str, attn: str, rules: str = "lxt"):
    """lxt-patched model for the architecture in ``model_dir/config.json``.

    Returns ``(model, embedding_norm or None, head_position(ids) -> int, description)``; head_position is
    the token the classification head reads (BERT: the pooler's [CLS], position 0)."""
    import lxt  # noqa: F401
    from lxt.efficient import monkey_patch
    from lxt.efficient.models import DEFAULT_MAP

    with open(os.path.join(model_dir, "config.json")) as f:
        model_type = json.load(f)["model_type"]
    if model_type == "bert" and rules == "ours":  # mpnet_rules.py's rule code on BERT, checked against lxt's
        from mpnet_rules import patch_bert_like_mpnet

        if attn != "eager":
            raise SystemExit("--rules ours patches BERT's eager attention; run with --attn eager")
        patched = patch_bert_like_mpnet(modeling_bert)
        model = modeling_bert.BertForSequenceClassification.from_pretrained(model_dir, attn_implementation="eager")
        return (model, model.bert.embeddings.LayerNorm, lambda ids: 0,
                f"mpnet_rules.py's AttnLRP rules on {', '.join(patched)}")
    if rules == "ours" and model_type != "mpnet":
        raise SystemExit(f"--rules ours covers bert and mpnet, not {model_type!r}")
    if model_type == "bert":
        monkey_patch(modeling_bert, verbose=True)
        model = modeling_bert.BertForSequenceClassification.from_pretrained(model_dir, attn_implementation=attn)
        attn_cls = type(model.bert.encoder.layer[0].attention.self)
        assert attn_cls.__module__ == "lxt.efficient.models.bert", f"BERT not patched: {attn_cls}"
        return model, model.bert.embeddings.LayerNorm, lambda ids: 0, f"attention {attn_cls.__name__}"
    if model_type == "llama":
        monkey_patch(modeling_llama, verbose=True)
        model = modeling_llama.LlamaForSequenceClassification.from_pretrained(model_dir, attn_implementation=attn)
        for fn in (modeling_llama.eager_attention_forward, modeling_llama.LlamaRMSNorm.forward,
                   modeling_llama.LlamaMLP.forward):
            assert fn.__module__ == "lxt.efficient.patches", f"Llama not patched: {fn}"
        pad = model.config.pad_token_id

        def head_position(ids):  # as LlamaForSequenceClassification: the rightmost non-padding token
            real = [i for i, t in enumerate(ids) if t != pad]
            return real[-1] if real else 0

        return model, None, head_position, (f"attention {model.config._attn_implementation} (wrapped by lxt), "
                                            f"pad_token_id {pad}, rope_theta {model.config.rope_theta}")
    if model_type == "mpnet":  # lxt 2.1 has no MPNet file: its rules applied by mpnet_rules.py
        import transformers.models.mpnet.modeling_mpnet as modeling_mpnet

        from mpnet_rules import patch_mpnet

        if attn != "eager":
            raise SystemExit("MPNet has one attention path (eager) in transformers 4.x; run with --attn eager")
        patched = patch_mpnet(modeling_mpnet)
        model = modeling_mpnet.MPNetForSequenceClassification.from_pretrained(model_dir)
        return (model, model.mpnet.embeddings.LayerNorm, lambda ids: 0,
                f"AttnLRP rules of mpnet_rules.py on {', '.join(patched)}")
    supported = ", ".join(m.__name__.rsplit(".", 1)[-1] for m in DEFAULT_MAP)
    raise SystemExit(f"lxt {getattr(lxt, '__version__', '2.1')} has no AttnLRP rules for model_type "
                     f"{model_type!r}; lxt.efficient.models.DEFAULT_MAP covers: {supported}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", default="/tmp/prxai-attnlrp/minilm--movie-sentences/examples.jsonl")
    p.add_argument("--model-dir", default="/tmp/prxai-attnlrp/minilm--movie-sentences/model")
    p.add_argument("--out", required=True)
    p.add_argument("--attn", default="eager", choices=("eager", "sdpa"),
                   help="lxt patches both attention paths; eager is the plain matmul path")
    p.add_argument("--limit", type=int, default=None, help="only the first N examples")
    p.add_argument("--rules", default="lxt", choices=("lxt", "ours"),
                   help="bert: lxt's BERT file (default) or mpnet_rules.py's rule code, as a check of the latter; "
                        "mpnet always uses mpnet_rules.py")
    a = p.parse_args()

    tv = _stub_torchvision_if_broken()
    import lxt

    model, emb_norm, head_position, desc = load_patched(a.model_dir, a.attn, a.rules)
    model.eval()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"lxt {getattr(lxt, '__version__', 'n/a')}, torchvision {tv}; {type(model).__name__}, {desc}",
          file=sys.stderr)

    # BERT: capture the input of the embedding LayerNorm (word + position + token-type embeddings).
    captured = {}

    def _pre_hook(_module, args):
        x = args[0]
        x.retain_grad()
        captured["x"] = x

    if emb_norm is not None:
        emb_norm.register_forward_pre_hook(_pre_hook)

    examples = [json.loads(line) for line in open(a.examples)]
    if a.limit is not None:
        examples = examples[: a.limit]
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    embed = model.get_input_embeddings()
    is_llama = model.config.model_type == "llama"
    with open(a.out, "w") as f:
        for e in examples:
            ids = torch.tensor([e["input_ids"]])
            ours = torch.tensor(e["logits"])
            target = int(ours.argmax())
            pos = head_position(e["input_ids"])
            t0 = time.perf_counter()
            embeds = embed(ids).detach().requires_grad_()
            kwargs = {"use_cache": False} if is_llama else {}
            if not is_llama or pos == ids.shape[1] - 1:
                out = model(inputs_embeds=embeds, attention_mask=torch.ones_like(ids), output_hidden_states=True,
                            **kwargs)
                logits, hidden = out.logits, out.hidden_states
            else:  # Llama input ending in padding tokens: the head reads the rightmost real token
                out = model.model(inputs_embeds=embeds, attention_mask=torch.ones_like(ids),
                                  output_hidden_states=True, **kwargs)
                logits, hidden = model.score(out.last_hidden_state[:, pos]), out.hidden_states
            for h in hidden:
                h.retain_grad()
            logits[0, target].backward()
            rel = (embeds * embeds.grad).sum(-1)[0]
            elapsed = time.perf_counter() - t0
            scores = [float(v) for v in rel.detach()]
            if emb_norm is not None:
                x = captured.pop("x")
                rel_all = float((x.detach() * x.grad).sum())
            else:
                rel_all = float(rel.detach().sum())
            layers = [float((h.detach() * h.grad).sum()) if h.grad is not None else 0.0 for h in hidden]
            rec = {
                "example": e["example"],
                "input_ids": e["input_ids"],
                "label": e.get("label"),
                "target": target,
                "scores": scores,
                "logit_diff": float((logits[0].detach() - ours).abs().max()),
                "relevance_sum": float(rel.detach().sum()),
                "relevance_sum_embeddings": rel_all,
                "layer_relevance": layers,
                "head_position": pos,
                "target_logit": float(logits[0, target].detach()),
                "finite": all(math.isfinite(s) for s in scores),
                "time_s": elapsed,
            }
            f.write(json.dumps(rec) + "\n")
    print(f"wrote {len(examples)} records to {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
