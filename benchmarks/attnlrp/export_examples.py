"""Export the default model and the benchmark's examples for the AttnLRP (lxt) comparison.

Runs in the project's own venv (captum_prxai installed). Writes:
  <model_dir>/          the merged default classifier (save_pretrained) and its tokenizer
  <examples>            one JSON line per example: example, text, input_ids, label, logits (ours)

The examples are exactly those of the ablation benchmark on the holdout half:
dataset_half(load_dataset("movie-sentences", "test"), "holdout"), select_examples(len, n, seed).
"""
import argparse
import json

import torch

torch.set_num_threads(1)

from captum_prxai.bench.ablation import dataset_half
from captum_prxai.bench.runner import select_examples
from captum_prxai.data import load_dataset
from captum_prxai.models import load_default


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-dir", default="/tmp/prxai-default-merged")
    p.add_argument("--examples", default="/tmp/prxai-attnlrp-examples.jsonl")
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-length", type=int, default=512)
    a = p.parse_args()

    model, tok = load_default()
    model.eval()
    model.save_pretrained(a.model_dir)
    tok.save_pretrained(a.model_dir)

    ds = dataset_half(load_dataset("movie-sentences", "test"), "holdout")
    idx = select_examples(len(ds.texts), a.n, a.seed)
    with open(a.examples, "w") as f:
        for i in idx:
            enc = tok(ds.texts[i], truncation=True, max_length=a.max_length, return_special_tokens_mask=True)
            ids = torch.tensor([enc["input_ids"]])
            with torch.no_grad():
                logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0].tolist()
            f.write(json.dumps({"example": i, "text": ds.texts[i], "input_ids": enc["input_ids"],
                                "label": ds.labels[i], "logits": logits}) + "\n")
    print(f"wrote {len(idx)} examples to {a.examples}; model to {a.model_dir} "
          f"({type(model).__name__}, attn={model.config._attn_implementation})")


if __name__ == "__main__":
    main()
