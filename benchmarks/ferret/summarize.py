"""Compare our comprehensiveness / sufficiency with ferret's on the same scores and write summary.md.

Reads, per cell folder under ``--root``: ``examples.jsonl`` (our scores and per-example metric values,
from ``export_cell.py``) and ``ferret.jsonl`` (ferret's values, from ``ferret_eval.py``). Writes
``<root>/summary.md`` and ``<root>/summary.json``: per cell, methods x (ours, ferret) mean ± s.e.;
the method rankings and Kendall's tau between ours and ferret's; per-example Spearman correlations;
and the diagnostics used to explain the differences. Anything after the line
``<!-- analysis -->`` in an existing summary.md is kept (the hand-written explanation).

Runs in the project venv (numpy, scipy and the method registry, whose labels it prints).
"""
import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau, spearmanr

from captum_prxai.exceptions import PRXAIError
from captum_prxai.methods import resolve_method

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the benchmarks' own modules
from research_methods import register_research_methods  # noqa: E402

register_research_methods()  # the research variants the cross-check names (their labels)


def label(name: str) -> str:
    """The method's label in the project's registry (``resolve_method(name).label``), the one every table of the
    project prints; the name itself for a method the registry does not know."""
    try:
        return resolve_method(name).label
    except PRXAIError:
        return name


CELLS = ["minilm--movie-sentences", "mpnet--tweets", "smollm2--tweets"]
MARK = "<!-- analysis -->"


def ms(x):
    x = np.asarray(x, dtype=float)
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else 0.0


def fmt(x):
    m, s = ms(x)
    return f"{m:.3f} ± {s:.3f}"


def ranking(means, higher_better):
    return sorted(means, key=lambda k: -means[k] if higher_better else means[k])


def tau(a, b, methods):
    ra = {m: i for i, m in enumerate(a)}
    rb = {m: i for i, m in enumerate(b)}
    t = kendalltau([ra[m] for m in methods], [rb[m] for m in methods])[0]
    return float(t)


def cell_report(folder: Path):
    ex = [json.loads(l) for l in open(folder / "examples.jsonl")]
    fr = [json.loads(l) for l in open(folder / "ferret.jsonl")]
    methods = list(ex[0]["methods"])
    variants = list(dict.fromkeys(r["variant"] for r in fr))
    ferret = {(r["example"], r["method"], r["variant"]): r for r in fr}
    done = sorted({r["example"] for r in fr})
    ex = [e for e in ex if e["example"] in done]
    ids = [e["example"] for e in ex]
    ours = {m: {k: np.array([e["methods"][m][k] for e in ex]) for k in ("comprehensiveness", "sufficiency")}
            for m in methods}
    fer = {v: {m: {k: np.array([ferret[(i, m, v)][k] for i in ids]) for k in ("comprehensiveness", "sufficiency")}
               for m in methods} for v in variants}
    ours10 = None
    if (folder / "ours_ferret_thresholds.jsonl").exists():
        o10 = {(r["example"], r["method"]): r for r in map(json.loads, open(folder / "ours_ferret_thresholds.jsonl"))}
        if all((i, m) in o10 for i in ids for m in methods):
            ours10 = {m: {k: np.array([o10[(i, m)][k] for i in ids]) for k in ("comprehensiveness", "sufficiency")}
                      for m in methods}
    first = [ferret[(i, methods[0], variants[0])] for i in ids]
    checks = {
        "n_examples": len(ids),
        "ids_match": sum(r["ids_match"] for r in first),
        "max_prob_diff": max(abs(r["prob_ferret"] - r["prob_ours"]) for r in first),
        "first_last_tokens": sorted({tuple(r["tokens_ferret_first_last"]) for r in first})[:3],
        "special_tokens_per_example": sorted({sum(e["special_tokens_mask"]) for e in ex}),
        "mean_real_tokens": float(np.mean([len(e["input_ids"]) - sum(e["special_tokens_mask"]) for e in ex])),
    }
    # the same (example, method) in the faithfulness matrix's cell, when it has it
    matrix_csv = folder.parent.parent / "matrix" / folder.name / "results.csv"
    if matrix_csv.exists():
        import csv

        ref = {(int(r["example"]), r["method"]): r for r in csv.DictReader(open(matrix_csv))}
        diffs = [abs(float(ref[(e["example"], m)][k]) - e["methods"][m][k]) for e in ex for m in methods
                 for k in ("comprehensiveness", "sufficiency") if (e["example"], m) in ref]
        checks["matrix_pairs"] = len(diffs) // 2
        checks["matrix_max_diff"] = max(diffs) if diffs else None
        pd = [abs(float(ref[(e["example"], m)]["prob"]) - e["prob"]) for e in ex for m in methods
              if (e["example"], m) in ref]
        checks["matrix_max_prob_diff"] = max(pd) if pd else None
    diag = {}
    for m in methods:
        pos = []
        for e in ex:
            s = np.array(e["methods"][m]["scores"])
            real = np.array(e["special_tokens_mask"]) == 0
            pos.append(float((s[real] > 0).mean()))
        d = {"frac_positive": float(np.mean(pos)), "no_positive": int(sum(p == 0 for p in pos))}
        for v in variants:
            rs = [ferret[(i, m, v)] for i in ids]
            d[v] = {"levels_comp": float(np.mean([r["levels_comp"] for r in rs])),
                    "levels_suff": float(np.mean([r["levels_suff"] for r in rs])),
                    "no_level": int(sum(r["levels_comp"] == 0 for r in rs)),
                    "retok_mismatch": float(sum(r["retok_mismatch_comp"] + r["retok_mismatch_suff"] for r in rs)
                                            / max(1, sum(r["levels_comp"] + r["levels_suff"] for r in rs)))}
        diag[m] = d
    out = {"checks": checks, "methods": methods, "variants": variants, "default_method": ex[0].get("default_method"),
           "means": {}, "rankings": {}, "tau": {},
           "spearman": {}, "diagnostics": diag}
    for k, hb in (("comprehensiveness", True), ("sufficiency", False)):
        our_means = {m: float(ours[m][k].mean()) for m in methods}
        out["means"][f"ours/{k}"] = {m: ms(ours[m][k]) for m in methods}
        out["rankings"][f"ours/{k}"] = ranking(our_means, hb)
        for v in variants:
            fm = {m: float(fer[v][m][k].mean()) for m in methods}
            out["means"][f"ferret-{v}/{k}"] = {m: ms(fer[v][m][k]) for m in methods}
            out["rankings"][f"ferret-{v}/{k}"] = ranking(fm, hb)
            no_rand = [m for m in methods if m != "random"]
            out["tau"][f"{v}/{k}"] = {
                "all": tau(out["rankings"][f"ours/{k}"], out["rankings"][f"ferret-{v}/{k}"], methods),
                "without_random": tau(out["rankings"][f"ours/{k}"], out["rankings"][f"ferret-{v}/{k}"], no_rand)}
            sp = {m: float(spearmanr(ours[m][k], fer[v][m][k])[0]) for m in methods}
            sp["pooled"] = float(spearmanr(np.concatenate([ours[m][k] for m in methods]),
                                           np.concatenate([fer[v][m][k] for m in methods]))[0])
            # within-example agreement: per example, Spearman across methods of ours vs ferret's
            within = []
            for j in range(len(ids)):
                a = [ours[m][k][j] for m in methods]
                b = [fer[v][m][k][j] for m in methods]
                if np.ptp(a) > 0 and np.ptp(b) > 0:
                    within.append(spearmanr(a, b)[0])
            sp["within_example_mean"] = float(np.mean(within)) if within else float("nan")
            out["spearman"][f"{v}/{k}"] = sp
        if ours10 is not None:
            m10 = {m: float(ours10[m][k].mean()) for m in methods}
            out["means"][f"ours10/{k}"] = {m: ms(ours10[m][k]) for m in methods}
            r10 = ranking(m10, hb)
            out["rankings"][f"ours10/{k}"] = r10
            no_rand = [m for m in methods if m != "random"]
            out["tau"][f"ours10/{k}"] = {"all": tau(out["rankings"][f"ours/{k}"], r10, methods),
                                         "without_random": tau(out["rankings"][f"ours/{k}"], r10, no_rand)}
            out["tau"][f"ours10-vs-default/{k}"] = {
                "all": tau(r10, out["rankings"][f"ferret-default/{k}"], methods),
                "without_random": tau(r10, out["rankings"][f"ferret-default/{k}"], no_rand)}
            sp = {m: float(spearmanr(ours10[m][k], fer["default"][m][k])[0]) for m in methods}
            sp["pooled"] = float(spearmanr(np.concatenate([ours10[m][k] for m in methods]),
                                           np.concatenate([fer["default"][m][k] for m in methods]))[0])
            within = []
            for j in range(len(ids)):
                a = [ours10[m][k][j] for m in methods]
                b = [fer["default"][m][k][j] for m in methods]
                if np.ptp(a) > 0 and np.ptp(b) > 0:
                    within.append(spearmanr(a, b)[0])
            sp["within_example_mean"] = float(np.mean(within)) if within else float("nan")
            out["spearman"][f"ours10-vs-default/{k}"] = sp
    return out, ours, fer, ours10


def write_md(root: Path, reports):
    L = ["# ferret cross-check of our comprehensiveness and sufficiency", "",
         "Same scores, two implementations: ours (`captum_prxai.metrics.evaluate_faithfulness` through "
         "`run_benchmark`: ERASER comprehensiveness / sufficiency, mean over the removal bins 1/5/10/20/50% of "
         "the real tokens, k = round(f·n) ≥ 1, tokens deleted on the ids, special tokens kept) and ferret-xai 0.4.2's "
         "`AOPC_Comprehensiveness_Evaluation` / `AOPC_Sufficiency_Evaluation` (defaults: thresholds 10, 20, …, 100% "
         "with k = floor(f·n), only tokens with a positive score, [CLS]/[SEP] excluded, tokens deleted by "
         "decoding the remaining ids to text and re-tokenising it; a level whose rationale repeats the previous "
         "one, or that selects no token, is left out of the average). Both use the softmax probability of the "
         "class our benchmark explains (the predicted one). Commands: `COMMAND`, `benchmarks/ferret/README.md`.",
         "",
         "Variants of ferret (its evaluator, our scores): **default** = ferret's defaults; **allsigns** = "
         "`only_pos=False`; **eraser** = `only_pos=False` and thresholds = our bins 1/5/10/20/50% (still "
         "ferret's floor, skipping of empty and repeated levels, and decode/re-tokenise); **protected** (decoder "
         "cells) = eraser with the explained last token kept in every perturbed input, as our decoder metrics keep "
         "it (its score set below every other for comprehensiveness and above every other for sufficiency; ferret "
         "still counts k over all tokens, the kept one included).", ""]
    for cell, (rep, ours, fer, ours10) in reports.items():
        c = rep["checks"]
        L += [f"## {cell}", "",
              f"{c['n_examples']} examples (holdout half, `select_examples(len, n, 0)`), {c['mean_real_tokens']:.1f} real "
              f"tokens on average; special tokens per example: {c['special_tokens_per_example']}. ferret's tokenisation "
              f"equals our `input_ids` on {c['ids_match']}/{c['n_examples']} examples; max |p_ferret − p_ours| of the "
              f"target on the full input: {c['max_prob_diff']:.1e}."
              + (f" Against the faithfulness matrix's cell (`benchmarks/results/matrix/{cell}/results.csv`), on the "
                 f"{c['matrix_pairs']} (example, method) pairs both have: max |Δ| of our comp / suff "
                 f"{c['matrix_max_diff']:.1e}, of the full-input target probability {c['matrix_max_prob_diff']:.1e}"
                 + (" (the matrix ran on other weights of this model)" if c["matrix_max_prob_diff"] > 1e-4 else "")
                 + "." if c.get("matrix_pairs") else ""), ""]
        hdr = "| Method | our comp ↑ | our suff ↓ | ferret comp ↑ | ferret suff ↓ |"
        L += [hdr, "|---|---:|---:|---:|---:|"]
        for m in rep["methods"]:
            L.append(f"| {label(m)} | {fmt(ours[m]['comprehensiveness'])} | {fmt(ours[m]['sufficiency'])} | "
                     f"{fmt(fer['default'][m]['comprehensiveness'])} | {fmt(fer['default'][m]['sufficiency'])} |")
        others = [v for v in rep["variants"] if v != "default"]
        if others:
            L += ["", "ferret variants:", "",
                  "| Method | " + " | ".join(f"{v} comp ↑ | {v} suff ↓" for v in others) + " |",
                  "|---|" + "---:|---:|" * len(others)]
            for m in rep["methods"]:
                L.append(f"| {label(m)} | " + " | ".join(
                    f"{fmt(fer[v][m]['comprehensiveness'])} | {fmt(fer[v][m]['sufficiency'])}" for v in others) + " |")
        if ours10 is not None:
            L += ["", "Our metric code at ferret's thresholds (10, 20, …, 100%; `ours_at_ferret_thresholds.py`):", "",
                  "| Method | ours@10–100% comp ↑ | ours@10–100% suff ↓ |", "|---|---:|---:|"]
            for m in rep["methods"]:
                L.append(f"| {label(m)} | {fmt(ours10[m]['comprehensiveness'])} | "
                         f"{fmt(ours10[m]['sufficiency'])} |")
        impls = [("ours", ours)] + [(f"ferret {v}", fer[v]) for v in rep["variants"]]
        if ours10 is not None:
            impls.append(("ours @10–100%", ours10))
        # the cell's default, as export_cell.py recorded it (cells exported before it did: PR-TAG± on decoders,
        # whose rows carry an explained position, PR-TAG on encoders)
        decoder = "protected" in rep["variants"]
        base = rep.get("default_method") or next(
            (m for m in (("pr-tag-pm", "pr-tag") if decoder else ("pr-tag",)) if m in rep["methods"]), rep["methods"][0])
        name = label(base)
        others_m = [m for m in rep["methods"] if m != base]
        L += ["", f"Paired differences {name} − method (same examples, mean ± s.e.; comprehensiveness: "
              f"> 0 means {name} is better, sufficiency: < 0 means {name} is better):", "",
              "| Metric | Implementation | " + " | ".join(label(m) for m in others_m) + " |",
              "|---|---|" + "---:|" * len(others_m)]
        for k in ("comprehensiveness", "sufficiency"):
            for name, vals in impls:
                L.append(f"| {k} | {name} | " + " | ".join(fmt(vals[base][k] - vals[m][k]) for m in others_m) + " |")
        L += ["", "Rankings (best first) and Kendall's τ with ours (all methods / without Random):", "",
              "| Metric | Implementation | Ranking | τ | τ w/o Random |", "|---|---|---|---:|---:|"]
        for k in ("comprehensiveness", "sufficiency"):
            L.append(f"| {k} | ours | {' > '.join(label(m) for m in rep['rankings'][f'ours/{k}'])} | | |")
            for v in rep["variants"]:
                t = rep["tau"][f"{v}/{k}"]
                L.append(f"| {k} | ferret {v} | {' > '.join(label(m) for m in rep['rankings'][f'ferret-{v}/{k}'])} "
                         f"| {t['all']:.2f} | {t['without_random']:.2f} |")
            if f"ours10/{k}" in rep["rankings"]:
                t = rep["tau"][f"ours10/{k}"]
                t2 = rep["tau"][f"ours10-vs-default/{k}"]
                L.append(f"| {k} | ours @10–100% | {' > '.join(label(m) for m in rep['rankings'][f'ours10/{k}'])} "
                         f"| {t['all']:.2f} | {t['without_random']:.2f} |")
                L.append(f"| {k} | ours @10–100% vs ferret default | | {t2['all']:.2f} | {t2['without_random']:.2f} |")
        L += ["", "Per-example Spearman ρ between our and ferret's values (per method over examples; pooled over "
              "all (example, method) pairs; within-example = mean over examples of ρ across the methods):", "",
              "| Metric | Variant | " + " | ".join(label(m) for m in rep["methods"]) +
              " | pooled | within-example |", "|---|---|" + "---:|" * (len(rep["methods"]) + 2)]
        for k in ("comprehensiveness", "sufficiency"):
            for v in rep["variants"]:
                sp = rep["spearman"][f"{v}/{k}"]
                L.append(f"| {k} | {v} | " + " | ".join(f"{sp[m]:.2f}" for m in rep["methods"]) +
                         f" | {sp['pooled']:.2f} | {sp['within_example_mean']:.2f} |")
            if f"ours10-vs-default/{k}" in rep["spearman"]:
                sp = rep["spearman"][f"ours10-vs-default/{k}"]
                L.append(f"| {k} | default vs ours @10–100% | " + " | ".join(f"{sp[m]:.2f}" for m in rep["methods"]) +
                         f" | {sp['pooled']:.2f} | {sp['within_example_mean']:.2f} |")
        L += ["", "Diagnostics: share of real tokens with a positive score (only these can be removed under ferret's "
              "`only_pos=True`), examples with none; mean number of removal levels ferret averaged (of 10 default / "
              "5 eraser), examples where it had none (then comp = 0, suff = 1 by ferret's convention); share of "
              "ferret's perturbed texts that do not re-tokenise to the intended ids.", "",
              "| Method | positive share | no positive | " + " | ".join(
                  f"{v} levels comp / suff | {v} no level | {v} re-tok. mismatch" for v in rep["variants"]) + " |",
              "|---|---:|---:|" + "---:|---:|---:|" * len(rep["variants"])]
        for m in rep["methods"]:
            d = rep["diagnostics"][m]
            L.append(f"| {label(m)} | {d['frac_positive']:.2f} | {d['no_positive']} | " + " | ".join(
                f"{d[v]['levels_comp']:.1f} / {d[v]['levels_suff']:.1f} | {d[v]['no_level']} | {d[v]['retok_mismatch']:.3f}"
                for v in rep["variants"]) + " |")
        L.append("")
    path = root / "summary.md"
    tail = ""
    if path.exists() and MARK in path.read_text():
        tail = path.read_text().split(MARK, 1)[1]
    path.write_text("\n".join(L) + "\n" + MARK + tail)
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default="benchmarks/results/ferret-crosscheck")
    p.add_argument("--cells", default=",".join(CELLS))
    a = p.parse_args()
    root = Path(a.root)
    reports = {}
    for cell in a.cells.split(","):
        if (root / cell / "ferret.jsonl").exists():
            reports[cell] = cell_report(root / cell)
    (root / "summary.json").write_text(json.dumps({c: r[0] for c, r in reports.items()}, indent=1) + "\n")
    print(write_md(root, reports))


if __name__ == "__main__":
    main()
