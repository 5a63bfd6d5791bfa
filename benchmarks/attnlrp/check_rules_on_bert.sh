#!/usr/bin/env bash
# mpnet_rules.py's AttnLRP rule code, patched onto BERT, against lxt's own BERT file: the same scores are expected.
# From the repository root, after run_cell.sh <a MiniLM cell> (it needs that cell's export and committed scores):
#   benchmarks/attnlrp/check_rules_on_bert.sh minilm--tweets
set -euo pipefail
CELL=${1:-minilm--tweets}
LXT_PY=${LXT_PY:-/work/lxt-venv/bin/python}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1
WORK=/tmp/prxai-attnlrp/$CELL
LXT_SCORES=benchmarks/results/attnlrp-${CELL/--/-}/scores.jsonl
OUT=benchmarks/results/attnlrp-mpnet-rules-check.md
"$LXT_PY" benchmarks/attnlrp/attnlrp_scores.py --examples "$WORK/examples.jsonl" --model-dir "$WORK/model" \
    --rules ours --out "$WORK/scores-ours.jsonl"
"$LXT_PY" - "$LXT_SCORES" "$WORK/scores-ours.jsonl" "$CELL" "$OUT" <<'PY'
import json, sys
lxt_path, ours_path, cell, out = sys.argv[1:]
lxt = {r["example"]: r for r in map(json.loads, open(lxt_path))}
ours = {r["example"]: r for r in map(json.loads, open(ours_path))}
assert set(ours) <= set(lxt), "examples differ"
diff = max(max(abs(a - b) for a, b in zip(lxt[e]["scores"], ours[e]["scores"])) for e in ours)
logit = max(abs(lxt[e]["target_logit"] - ours[e]["target_logit"]) for e in ours)
top = max(max(abs(a) for a in lxt[e]["scores"]) for e in ours)
same_len = all(len(lxt[e]["scores"]) == len(ours[e]["scores"]) for e in ours)
text = (f"# AttnLRP rule code of `mpnet_rules.py`, checked on BERT\n\n"
        f"`benchmarks/attnlrp/check_rules_on_bert.sh {cell}`: the rule code that `mpnet_rules.py` applies to MPNet "
        f"(`patch_bert_like_mpnet`: the same attention core, feed-forward and tanh rules, lxt's LayerNorm and dropout "
        f"patches), patched onto BERT's eager attention instead of lxt's own BERT file, on the {len(ours)} examples of "
        f"`{cell}`.\n\n| check | result |\n| --- | --- |\n"
        f"| max abs score difference to lxt's BERT scores (`{lxt_path}`) | {diff:.1e} (largest absolute score {top:.2f}) |\n"
        f"| max abs target-logit difference | {logit:.1e} |\n| one score per token in both | {'yes' if same_len else 'no'} |\n")
open(out, "w").write(text)
print(text)
sys.exit(0 if diff < 1e-5 and same_len else 1)
PY
