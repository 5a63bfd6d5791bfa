"""Export a matrix cell's model and examples for the AttnLRP (lxt) comparison.

Runs in the project's own venv (captum_prxai installed). For a cell of ``benchmarks/matrix.py``
(``--cell minilm--tweets``: its model, number of examples and max_length) it writes:
  <model_dir>/          the model (save_pretrained) and its tokenizer
  <examples>            one JSON line per example: example, text, input_ids, label, logits (ours)
  <examples stem>.cell.json   the cell, model name, n, seed and max_length (read by summarize.py)

The examples are exactly those of the matrix cell: dataset_half(load_dataset(<dataset>, "test"),
"holdout"), select_examples(len, n, seed), tokenised as the benchmark does (truncation=True at the
max_length the benchmark resolves for the cell), logits from the benchmark's forward function.

transformers 5 writes a Llama config with ``rope_parameters`` only; the ``rope_theta`` key that
transformers 4.x reads (it would otherwise fall back to 10000) is added to the saved config.json.
"""
import argparse
import importlib.util
import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)

from captum_prxai.bench.ablation import dataset_half  # noqa: E402
from captum_prxai.bench.runner import resolve_max_length, select_examples  # noqa: E402
from captum_prxai.data import load_dataset  # noqa: E402
from captum_prxai.methods import make_forward_func  # noqa: E402
from captum_prxai.models import load_model  # noqa: E402

MATRIX = Path(__file__).resolve().parent.parent / "matrix.py"


def matrix_cells():
    spec = importlib.util.spec_from_file_location("prxai_matrix", MATRIX)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod.CELLS


def _config_for_transformers4(model_dir: Path) -> list:
    """Add the transformers-4.x spelling of keys that transformers 5 renamed; returns the keys added."""
    path = model_dir / "config.json"
    cfg = json.loads(path.read_text())
    added = []
    rope = cfg.get("rope_parameters")
    if isinstance(rope, dict) and "rope_theta" not in cfg and "rope_theta" in rope:
        cfg["rope_theta"] = rope["rope_theta"]
        added.append("rope_theta")
        if rope.get("rope_type", "default") != "default" and "rope_scaling" not in cfg:
            cfg["rope_scaling"] = {k: v for k, v in rope.items() if k != "rope_theta"}
            added.append("rope_scaling")
    if "dtype" in cfg and "torch_dtype" not in cfg:
        cfg["torch_dtype"] = cfg["dtype"]
        added.append("torch_dtype")
    if added:
        path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return added


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cell", default="minilm--movie-sentences", help="a cell of benchmarks/matrix.py")
    p.add_argument("--model-dir", default=None, help="default /tmp/prxai-attnlrp/<cell>/model")
    p.add_argument("--examples", default=None, help="default /tmp/prxai-attnlrp/<cell>/examples.jsonl")
    p.add_argument("--n", type=int, default=None, help="default: the cell's (200 short, 100 long)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-length", type=int, default=None, help="default: the cell's (the model limit)")
    a = p.parse_args()

    cell = matrix_cells()[a.cell]
    n = a.n or cell.n or (100 if cell.long else 200)
    work = Path("/tmp/prxai-attnlrp") / cell.name
    model_dir = Path(a.model_dir) if a.model_dir else work / "model"
    examples = Path(a.examples) if a.examples else work / "examples.jsonl"
    model_dir.mkdir(parents=True, exist_ok=True)
    examples.parent.mkdir(parents=True, exist_ok=True)

    model, tok = load_model(cell.model)
    model.eval()
    max_length = resolve_max_length(a.max_length or cell.max_length, model, tok)
    model.save_pretrained(str(model_dir))
    tok.save_pretrained(str(model_dir))
    added = _config_for_transformers4(model_dir)
    forward = make_forward_func(model)

    ds = dataset_half(load_dataset(cell.dataset, "test"), "holdout")
    idx = select_examples(len(ds.texts), n, a.seed)
    with open(examples, "w") as f:
        for i in idx:
            # as captum_prxai.bench.runner.encode_text
            enc = tok(ds.texts[i], truncation=True, max_length=max_length, return_special_tokens_mask=True,
                      return_tensors="pt")
            ids = enc["input_ids"]
            mask = enc["attention_mask"] if "attention_mask" in enc else torch.ones_like(ids)
            assert bool(mask.all()), "one unpadded input per example"
            with torch.no_grad():
                logits = forward(ids, mask)[0].tolist()
            f.write(json.dumps({"example": i, "text": ds.texts[i], "input_ids": ids[0].tolist(),
                                "label": ds.labels[i], "logits": logits}) + "\n")
    info = {"cell": cell.name, "model": cell.model, "dataset": cell.dataset, "n": n, "seed": a.seed,
            "max_length": max_length, "model_dir": str(model_dir), "examples": str(examples),
            "config_keys_added": added}
    examples.with_name(examples.stem + ".cell.json").write_text(json.dumps(info, indent=1) + "\n")
    print(f"{cell.name}: wrote {len(idx)} examples (max_length {max_length}) to {examples}; model "
          f"{cell.model} to {model_dir} ({type(model).__name__}, attn={model.config._attn_implementation}, "
          f"pad_token_id={model.config.pad_token_id}); config keys added for transformers 4.x: {added or 'none'}")


if __name__ == "__main__":
    main()
