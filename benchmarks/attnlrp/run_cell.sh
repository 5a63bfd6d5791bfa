#!/usr/bin/env bash
# AttnLRP (lxt) scores for one matrix cell, from the repository root:
#   benchmarks/attnlrp/run_cell.sh minilm--tweets
# 1. export the cell's model and examples (project venv), 2. score them with lxt, eager attention
# (lxt venv) into benchmarks/results/attnlrp-<arch>-<dataset>/scores.jsonl, 3. score again with the
# sdpa attention path (kept under /tmp, for the agreement check; not for MPNet, which has one path),
# 4. write summary.md.
# SUMMARY_ONLY=1 skips steps 1-3 (reuses $WORK and scores.jsonl).
# Environment: PROJECT_PY (default .venv/bin/python), LXT_PY (default /work/lxt-venv/bin/python).
set -euo pipefail
CELL=${1:?usage: run_cell.sh <arch>--<dataset>}
PROJECT_PY=${PROJECT_PY:-.venv/bin/python}
LXT_PY=${LXT_PY:-/work/lxt-venv/bin/python}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1
WORK=/tmp/prxai-attnlrp/$CELL
OUT=benchmarks/results/attnlrp-${CELL/--/-}
mkdir -p "$OUT"
if [ -z "${SUMMARY_ONLY:-}" ]; then
"$PROJECT_PY" benchmarks/attnlrp/export_examples.py --cell "$CELL"
"$LXT_PY" benchmarks/attnlrp/attnlrp_scores.py --examples "$WORK/examples.jsonl" --model-dir "$WORK/model" \
    --out "$OUT/scores.jsonl"
# MPNet has one attention path in transformers 4.x: no second run to compare
grep -q '"model_type": "mpnet"' "$WORK/model/config.json" || \
"$LXT_PY" benchmarks/attnlrp/attnlrp_scores.py --examples "$WORK/examples.jsonl" --model-dir "$WORK/model" \
    --attn sdpa --out "$WORK/scores-sdpa.jsonl"
fi
COMPARE=()
[ -f "$WORK/scores-sdpa.jsonl" ] && COMPARE=(--compare "$WORK/scores-sdpa.jsonl")
MATRIX=()
[ -f "benchmarks/results/matrix/$CELL/results.csv" ] && MATRIX=(--matrix-results "benchmarks/results/matrix/$CELL/results.csv")
"$LXT_PY" benchmarks/attnlrp/summarize.py --scores "$OUT/scores.jsonl" --examples "$WORK/examples.jsonl" \
    "${COMPARE[@]}" "${MATRIX[@]}" --out "$OUT/summary.md"
"$PROJECT_PY" benchmarks/attnlrp/check_precomputed.py --cell "$CELL" --scores "$OUT/scores.jsonl" \
    --append "$OUT/summary.md"
