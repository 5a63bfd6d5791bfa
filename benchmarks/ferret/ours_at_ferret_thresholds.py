"""Our metric code at ferret's thresholds: comprehensiveness / sufficiency over 10, 20, ..., 100%.

Runs in the project venv on the scores of ``examples.jsonl`` (no method is rerun): the same
``captum_prxai.metrics.comprehensiveness`` / ``sufficiency`` as the benchmark (deletion on the ids,
special tokens kept, k = round(f·n) >= 1, every token eligible whatever its sign), only with
``bins=(0.1, ..., 1.0)``. Separates the effect of ferret's thresholds from that of its other
mechanics (floor, positive-only rationales, skipped repeated levels, decode/re-tokenise).

Also recomputes comprehensiveness at the ERASER bins from the stored scores and prints the largest
difference from the benchmark's stored value (a check of the export).

Writes ``--out`` (JSON Lines): one line per (example, method) with ``comprehensiveness`` and
``sufficiency`` (means over the ten levels) and their per-level values.
"""
import argparse
import json

import torch

torch.set_num_threads(1)

from captum_prxai.methods import MethodContext, make_forward_func
from captum_prxai.metrics import ERASER_BINS, comprehensiveness, sufficiency
from captum_prxai.models import load_default, load_model

FERRET_THRESHOLDS = tuple(round(0.1 * i, 1) for i in range(1, 11))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", required=True)
    p.add_argument("--model", required=True, help='model name for load_model, or "default"')
    p.add_argument("--out", required=True)
    a = p.parse_args()
    model, tok = load_default() if a.model == "default" else load_model(a.model)
    model.eval()
    forward = make_forward_func(model)
    pad = MethodContext.from_tokenizer(tok).pad_token_id  # as the benchmark's metric_kwargs
    worst = 0.0  # the stored scores at the ERASER bins must give back the benchmark's values
    with open(a.out, "w") as f:
        for line in open(a.examples):
            row = json.loads(line)
            ids = torch.tensor([row["input_ids"]])
            mask = torch.ones_like(ids)
            special = torch.tensor([row["special_tokens_mask"]])
            if row.get("explained_position") is not None:  # a decoder's explained token: kept, as the benchmark
                special[0, row["explained_position"]] = 1
            target = torch.tensor([row["target"]])
            for method, m in row["methods"].items():
                scores = torch.tensor([m["scores"]], dtype=torch.float32)
                kw = dict(target=target, bins=FERRET_THRESHOLDS, mode="delete", pad_token_id=pad)
                c = comprehensiveness(forward, ids, mask, special, scores, **kw)
                s = sufficiency(forward, ids, mask, special, scores, **kw)
                again = comprehensiveness(forward, ids, mask, special, scores, **{**kw, "bins": ERASER_BINS})
                worst = max(worst, abs(float(again.mean[0]) - m["comprehensiveness"]))
                f.write(json.dumps({"example": row["example"], "method": method,
                                    "comprehensiveness": float(c.mean[0]), "sufficiency": float(s.mean[0]),
                                    "comp_per_level": c.per_bin[0].tolist(),
                                    "suff_per_level": s.per_bin[0].tolist()}) + "\n")
    print(f"wrote {a.out}; max |recomputed - stored| comprehensiveness at the ERASER bins: {worst:.1e}")


if __name__ == "__main__":
    main()
