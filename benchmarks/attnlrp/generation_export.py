"""Export the generation benchmark's prompts and a decoder for AttnLRP (lxt) in its own venv.

Runs in the project's own venv. For one model of ``benchmarks/generation.py`` (``--model smollm2``) it
reads the benchmark's cache (``benchmarks/results/generation/cache.jsonl``), takes every ``_target``
record of that model (the greedy continuation of one prompt) made with the model's current weights (the
record's ``config_key`` equals the benchmark's key for these weights; records of other weights are
counted and left out), rebuilds the prompt with the benchmark's own functions (``SOURCE_LOADERS``,
``source_half``, ``tokenize_prompt``: BOS or chat template, the same token ids every other method
saw) and checks it against the record (text, text hash, token count; a record of a prompt that
generation.py now builds otherwise, which the benchmark no longer reads, is counted, named on stderr
and left out). It writes, under ``--work``
(default ``/tmp/prxai-attnlrp/generation-<model>``):

  model/           the model (``save_pretrained``; config keys added for transformers 4.x, as
                   ``export_examples.py`` does, and for Gemma 3 the rotary bases of its two layer types,
                   ``rope_theta`` and ``rope_local_base_freq``) and its tokenizer
  prompts.jsonl    one JSON line per prompt: model, source, half, example, text_sha, prompt (the text),
                   input_ids (the prompt), target (the continuation), protected (BOS / template tokens,
                   never deleted by the benchmark), positions (the positions of ``input_ids + target[:-1]``
                   whose logits predict ``target``: row k explains position ``n_in - 1 + k``),
                   target_logits (our logit of ``target[k]`` there), config_key
  logits.pt        ``{"<source>/<half>/<example>": (n_out, vocab) float32}``: our logits at ``positions``,
                   for the lxt side's check (max |lxt - ours|)
  export.json      model, weights fingerprint, counts, config keys added
"""
import argparse
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import torch

torch.set_num_threads(1)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from export_examples import _config_for_transformers4  # noqa: E402


def _layer_type_rope_for_transformers4(model_dir: Path) -> list:
    """Gemma 3: transformers 5 writes one ``rope_parameters`` entry per layer type; transformers 4.x reads
    ``rope_theta`` (full attention), ``rope_local_base_freq`` (sliding) and ``sliding_window_pattern``.
    Returns the keys added."""
    path = model_dir / "config.json"
    cfg = json.loads(path.read_text())
    rope, added = cfg.get("rope_parameters"), []
    if isinstance(rope, dict) and isinstance(rope.get("full_attention"), dict):
        for key, layer_type in (("rope_theta", "full_attention"), ("rope_local_base_freq", "sliding_attention")):
            params = rope.get(layer_type) or {}
            if key not in cfg and "rope_theta" in params:
                if params.get("rope_type", "default") != "default":
                    raise SystemExit(f"{layer_type} rope_type {params['rope_type']!r}: not translated for 4.x")
                cfg[key] = params["rope_theta"]
                added.append(key)
    if "_sliding_window_pattern" in cfg and "sliding_window_pattern" not in cfg:
        cfg["sliding_window_pattern"] = cfg["_sliding_window_pattern"]
        added.append("sliding_window_pattern")
    if added:
        path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return added


def load_generation():
    """benchmarks/generation.py as a module (it is a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("prxai_generation", ROOT / "benchmarks" / "generation.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def target_records(cache_path: Path, model_name: str, gen) -> list:
    """The latest ``_target`` record of each (source, half, example, text) of ``model_name``, in cache order."""
    from captum_prxai.bench.cache import RecordCache

    latest = {}
    for rec in RecordCache(cache_path).read().values():
        if rec["method"] == gen.TARGET and rec["model"] == model_name:
            latest[(rec["source"], rec["half"], int(rec["example"]), rec["text_sha"], rec["config_key"])] = rec
    return list(latest.values())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2", help="a model of benchmarks/generation.py MODELS")
    p.add_argument("--cache", default=str(ROOT / "benchmarks" / "results" / "generation" / "cache.jsonl"))
    p.add_argument("--work", default=None, help="default /tmp/prxai-attnlrp/generation-<model>")
    p.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    a = p.parse_args()

    gen = load_generation()
    from captum_prxai.bench.cache import model_fingerprint
    from captum_prxai.metrics import ERASER_BINS
    from captum_prxai.models.decoder import load_decoder

    work = Path(a.work) if a.work else Path("/tmp/prxai-attnlrp") / f"generation-{a.model}"
    model_dir = work / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    model, tok = load_decoder(a.model)
    model.eval()
    model_id = {"name": a.model, **model_fingerprint(model)}
    records = target_records(Path(a.cache), a.model, gen)
    counts = Counter()
    items = {}
    lines, logits = [], {}
    for rec in records:
        key = gen._keys(model_id, rec["source"], rec["half"], [], 8, tuple(ERASER_BINS))[gen.TARGET]
        if rec["config_key"] != key:  # a continuation of other weights (or another protocol)
            counts["other_key"] += 1
            continue
        if a.limit is not None and len(lines) >= a.limit:
            break
        source, half, example = rec["source"], rec["half"], int(rec["example"])
        if source not in items:
            items[source] = gen.SOURCE_LOADERS[source]()
        part = gen.source_half(items[source], source, half)
        prompt = gen.tokenize_prompt(tok, source, half, example, part[example])
        if prompt.sha != rec["text_sha"] or prompt.text != rec["prompt"] or prompt.ids.numel() != rec["n_in"]:
            # a continuation of a prompt that generation.py no longer builds: the benchmark never reads it
            counts["prompt_differs"] += 1
            print(f"left out: {source}/{half} example {example}: generation.py now builds another prompt "
                  f"({prompt.text!r} against the record's {rec['prompt']!r})", file=sys.stderr)
            continue
        target = torch.tensor(rec["target"], dtype=torch.long)
        n_in, n_out = prompt.ids.numel(), target.numel()
        ids = torch.cat([prompt.ids, target[:-1]]).reshape(1, -1)
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits[0]
        positions = list(range(n_in - 1, n_in - 1 + n_out))
        picked = out[positions].float()
        if picked.argmax(-1).tolist() != target.tolist():
            counts["not_argmax"] += 1  # greedy decoding with a KV cache against one full forward
        name = f"{source}/{half}/{example}"
        logits[name] = picked.clone()
        lines.append({"model": a.model, "source": source, "half": half, "example": example,
                      "text_sha": prompt.sha, "prompt": prompt.text, "input_ids": prompt.ids.tolist(),
                      "target": target.tolist(), "protected": prompt.protected.tolist(), "positions": positions,
                      "target_logits": picked[torch.arange(n_out), target].tolist(),
                      "config_key": rec["config_key"]})
        counts["exported"] += 1
    with open(work / "prompts.jsonl", "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    torch.save(logits, work / "logits.pt")
    try:
        model.save_pretrained(str(model_dir))
    except ValueError:  # a first load_decoder in a fresh cache gives the GGUF-loaded model, not serialisable
        model, tok = load_decoder(a.model)  # the dequantised cache, written by that first load
        if model_fingerprint(model)["weights"] != model_id["weights"]:
            raise SystemExit("generation_export.py: the dequantised cache's weights differ from the GGUF model's")
        model.save_pretrained(str(model_dir))
    tok.save_pretrained(str(model_dir))
    added = _config_for_transformers4(model_dir) + _layer_type_rope_for_transformers4(model_dir)
    info = {"model": a.model, "weights": model_id, "cache": str(a.cache), "counts": dict(counts),
            "config_keys_added": added, "class": type(model).__name__,
            "attn": model.config._attn_implementation}
    (work / "export.json").write_text(json.dumps(info, indent=1) + "\n")
    print(f"generation-{a.model}: exported {counts['exported']} prompts to {work / 'prompts.jsonl'} "
          f"({counts['other_key']} _target records of other weights and {counts['prompt_differs']} of prompts "
          f"generation.py now builds otherwise left out, {counts['not_argmax']} continuations "
          f"not the argmax of one full forward); model {type(model).__name__} to {model_dir}; config keys added for "
          f"transformers 4.x: {added or 'none'}")


if __name__ == "__main__":
    main()
