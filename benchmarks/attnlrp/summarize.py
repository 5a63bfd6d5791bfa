"""Write summary.md (checks of an AttnLRP run) from a scores.jsonl of attnlrp_scores.py.

Standard library only; run it with the lxt venv's python so that the versions it reports are that
venv's. Checks: lxt logits vs the project's, finiteness and one score per token, targets, optional
agreement with a second run (``--compare``, e.g. the sdpa attention path), time per example,
conservation (token-relevance sum vs target logit) and relevance by hidden state.
"""
import argparse
import hashlib
import json
import math
import platform
import statistics as st
from importlib import metadata
from pathlib import Path


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


def _pearson(x, y) -> float:
    mx, my = st.fmean(x), st.fmean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float("nan")


def _quartiles(v):
    q = st.quantiles(v, n=4, method="inclusive")
    return q[0], q[1], q[2]


def _g(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}f}"


def _e(x: float) -> str:
    return f"{x:.1e}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scores", required=True)
    p.add_argument("--examples", required=True, help="the examples file given to attnlrp_scores.py")
    p.add_argument("--cell-info", default=None,
                   help="the export's <examples stem>.cell.json (default: beside --examples)")
    p.add_argument("--matrix-results", default=None,
                   help="the matrix cell's results.csv: its examples, targets and token counts are checked")
    p.add_argument("--compare", default=None, help="scores.jsonl of a second run (e.g. --attn sdpa)")
    p.add_argument("--compare-label", default="eager vs sdpa lxt attention paths")
    p.add_argument("--out", required=True)
    a = p.parse_args()

    recs = [json.loads(line) for line in open(a.scores)]
    ex_path = Path(a.examples)
    info = json.loads(Path(a.cell_info or ex_path.with_name(ex_path.stem + ".cell.json")).read_text())
    a.cell, a.model_name, a.max_length, a.model_dir = info["cell"], info["model"], info["max_length"], info["model_dir"]
    raw = ex_path.read_bytes()
    exs = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
    by_ex = {e["example"]: e for e in exs}
    cfg = json.loads((Path(a.model_dir) / "config.json").read_text())
    id2label = {int(k): v for k, v in cfg.get("id2label", {}).items()}
    arch = (cfg.get("architectures") or ["?"])[0]
    n = len(recs)

    # the scores file covers exactly the examples, in order, with the same token ids
    assert [r["example"] for r in recs] == [e["example"] for e in exs], "scores and examples differ"
    assert all(r["input_ids"] == by_ex[r["example"]]["input_ids"] for r in recs), "token ids differ"

    logit_diff = [r["logit_diff"] for r in recs]
    one_per_token = all(len(r["scores"]) == len(r["input_ids"]) for r in recs)
    finite = sum(bool(r["finite"]) and all(math.isfinite(s) for s in r["scores"]) for r in recs)
    targets = [r["target"] for r in recs]
    labels = [r["label"] for r in recs]
    acc = sum(t == y for t, y in zip(targets, labels)) / n
    counts = ", ".join(f"{targets.count(c)} {id2label.get(c, c)}" for c in sorted(set(targets) | set(id2label)))
    times = [r["time_s"] for r in recs]
    lengths = [len(r["input_ids"]) for r in recs]
    truncated = sum(length >= a.max_length for length in lengths)
    head_last = sum(r.get("head_position", len(r["input_ids"]) - 1) == len(r["input_ids"]) - 1 for r in recs)

    rows = [
        ("lxt-patched logits vs project logits",
         f"max abs diff {_e(max(logit_diff))} over {n} examples "
         f"({'all' if all(d < 1e-3 for d in logit_diff) else sum(d < 1e-3 for d in logit_diff)} < 1e-3)"),
        ("scores finite, one per token",
         f"{'yes' if one_per_token else 'NO'} one per token; finite: {finite} of {n}"),
        ("targets (our argmax)", f"{counts}; accuracy vs label {_g(acc)}"),
        ("tokens (special tokens included)",
         f"median {st.median(lengths):g}, max {max(lengths)}; {truncated} of {n} cut at max_length {a.max_length}"),
    ]
    if "head_position" in recs[0] and cfg.get("model_type") == "llama":
        rows.append(("classification head reads the last token", f"{head_last} of {n}"))
    if a.compare:
        other = {r["example"]: r for r in map(json.loads, open(a.compare))}
        diffs = [max(abs(x - y) for x, y in zip(r["scores"], other[r["example"]]["scores"]))
                 for r in recs if r["example"] in other]
        ldiffs = [other[r["example"]]["logit_diff"] for r in recs if r["example"] in other]
        rows.append((a.compare_label, f"max score difference {_e(max(diffs))} over {len(diffs)} examples "
                                      f"(second run's max logit diff {_e(max(ldiffs))})"))
    if a.matrix_results:
        import csv

        seen = {}
        with open(a.matrix_results, newline="") as f:
            for row in csv.DictReader(f):
                seen.setdefault(int(row["example"]), (int(row["target"]), int(row["n_tokens"])))
        mine = {r["example"]: (r["target"], len(r["input_ids"])) for r in recs}
        common = sorted(set(mine) & set(seen))
        same_len = sum(mine[i][1] == seen[i][1] for i in common)
        differ = [i for i in common if mine[i][0] != seen[i][0]]
        text = (f"{len(common)} of {n} examples in the matrix's {len(seen)}; token counts agree on {same_len}, "
                f"targets on {len(common) - len(differ)} of {len(common)}")
        if differ:
            text += " (differ: " + ", ".join(f"example {i} {mine[i][0]} here, {seen[i][0]} there" for i in differ) + \
                    "; see benchmarks/attnlrp/README.md)"
        rows.append(("same examples as the matrix cell (`results.csv`: example, n_tokens, target)", text))
    rows.append(("time per example, 1 thread (forward + backward)",
                 f"mean {_g(st.fmean(times))} s, median {_g(st.median(times))} s, max {_g(max(times))} s; "
                 f"total {st.fsum(times):.1f} s"))

    logits = [r["target_logit"] for r in recs]
    sums = [r["relevance_sum"] for r in recs]
    sums_emb = [r["relevance_sum_embeddings"] for r in recs]
    ratio = [s / t for s, t in zip(sums, logits)]
    ratio_emb = [s / t for s, t in zip(sums_emb, logits)]
    llama = cfg.get("model_type") == "llama"

    out = []
    out.append(f"# AttnLRP (lxt {_version('lxt')}) on `{a.model_name}` ({arch}), "
               f"{a.cell.split('--', 1)[1]} holdout, {n} examples\n")
    out.append(f"Matrix cell `{a.cell}`. Commands and versions: `benchmarks/attnlrp/README.md`. "
               f"Scores: `scores.jsonl` (one line per example).")
    if cfg.get("model_type") == "mpnet":
        out.append("lxt has no MPNet file: its AttnLRP rules are applied to `modeling_mpnet` by "
                   "`benchmarks/attnlrp/mpnet_rules.py` (our construction, see its docstring); MPNet has one "
                   "attention path, so there is no eager-vs-sdpa row.")
    out.append(f"Examples file sha1 (`{a.examples}`, {len(exs)} lines): {hashlib.sha1(raw).hexdigest()}; "
               f"truncation at {a.max_length} tokens.\n")
    out.append(f"Versions: lxt {_version('lxt')}, torch {_version('torch')}, "
               f"transformers {_version('transformers')}, Python {platform.python_version()} (separate venv); "
               f"model exported with transformers {cfg.get('transformers_version', '?')} from "
               f"`captum_prxai.models.load_model({a.model_name!r})`.\n")
    out.append("## Checks\n")
    out.append("| check | result |\n| --- | --- |")
    out += [f"| {k} | {v} |" for k, v in rows]
    out.append("")
    out.append("## Conservation (sum of token relevances vs target logit)\n")
    out.append(f"Median target logit {_g(st.median(logits), 2)} (min {_g(min(logits), 3)}).\n")
    out.append("| quantity | median ratio to target logit | quartiles | Pearson r with logit |\n"
               "| --- | --- | --- | --- |")
    q = _quartiles(ratio)
    out.append(f"| sum of `scores` (word embeddings) | {_g(st.median(ratio))} | "
               f"{_g(q[0])} / {_g(q[1])} / {_g(q[2])} | {_g(_pearson(sums, logits), 2)} |")
    if not llama:
        q = _quartiles(ratio_emb)
        out.append(f"| word + position + token-type embeddings | {_g(st.median(ratio_emb))} | "
                   f"{_g(q[0])} / {_g(q[1])} / {_g(q[2])} | {_g(_pearson(sums_emb, logits), 2)} |")
    out.append("")
    neg = sum(s < 0 for s in sums)
    out.append(f"{neg} of {n} examples have a negative token-relevance sum. Ratio range "
               f"{_g(min(ratio), 1)} to {_g(max(ratio), 1)}; over the {sum(abs(t) > 0.5 for t in logits)} "
               f"examples with |target logit| > 0.5: {_g(min(r for r, t in zip(ratio, logits) if abs(t) > 0.5), 2)} "
               f"to {_g(max(r for r, t in zip(ratio, logits) if abs(t) > 0.5), 2)}.")
    if llama:
        out.append("\nThe word embeddings are the model's whole input (rotary positions, no position or "
                   "token-type embeddings), so there is no second embedding row.")
    out.append("")

    if "layer_relevance" in recs[0]:
        big = [r for r in recs if abs(r["target_logit"]) > 0.5]
        k = len(recs[0]["layer_relevance"])
        if llama:
            names = ["input embeddings"] + [f"output of layer {i}" for i in range(k - 2)] + ["final-norm output"]
        else:
            names = ["embedding output"] + [f"output of layer {i}" for i in range(k - 1)]
        med = [st.median(r["layer_relevance"][j] / r["target_logit"] for r in big) for j in range(k)]
        out.append("## Relevance by hidden state\n")
        out.append(f"Activation · gradient summed over a hidden state (`output_hidden_states`), as a ratio to the "
                   f"target logit; median over the {len(big)} examples with |target logit| > 0.5.\n")
        out.append("| hidden state | median ratio |\n| --- | --- |")
        out += [f"| {nm} | {_g(m)} |" for nm, m in zip(names, med)]
        drops = [(med[j + 1] - med[j], j) for j in range(k - 1)]
        d, j = max(drops)
        out.append("")
        out.append(f"Largest change between consecutive hidden states: {names[j]} {_g(med[j])} → "
                   f"{names[j + 1]} {_g(med[j + 1])}. Token relevance (word embeddings) median ratio over these "
                   f"examples: {_g(st.median(r['relevance_sum'] / r['target_logit'] for r in big))}.")
        out.append("")
    Path(a.out).write_text("\n".join(out))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
