"""Benchmark outputs: per-example CSV, method x metric tables, deletion-curve plot."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from captum_prxai._cache import write_atomic
from captum_prxai.bench.settings import MetricSettings
from captum_prxai.metrics.faithfulness import _pct
from captum_prxai.metrics.stats import bootstrap_ci, mean_sem

__all__ = ["MAIN_COLUMNS", "summarize", "write_csv", "read_csv", "write_markdown", "write_summary_json", "write_plot",
           "write_matrix", "default_check", "default_row", "write_default_check"]

#: (record key, header, higher is better?) of the main table
MAIN_COLUMNS = [
    ("comprehensiveness", "Comp. ↑", True),
    ("sufficiency", "Suff. ↓", False),
    ("aopc_most", "AOPC most-first ↑", True),
    ("aopc_least", "AOPC least-first ↓", False),
    ("log_odds", "Log-odds ↓", False),
    ("accuracy", "Acc. after removal ↓", False),
]


def _label(name: str) -> str:
    from captum_prxai.methods import METHODS

    spec = METHODS.get(name)
    return spec.label if spec is not None else name


def _stat(values: List[float]) -> Dict[str, float]:
    mean, sem = mean_sem(values)
    low, high = bootstrap_ci(values, n_resamples=1000, confidence=0.95, seed=0)
    return {"mean": mean, "sem": sem, "n": len(values), "ci95_low": low, "ci95_high": high}


def summarize(records: Sequence[Dict[str, Any]], methods: Sequence[str]) -> Dict[str, Dict[str, Dict[str, float]]]:
    """``{method: {metric: {"mean", "sem", "n", "ci95_low", "ci95_high"}}}`` over the examples.

    Metrics include ``time_s`` and ``peak_mem_mb``; the 95% interval is a
    percentile bootstrap (1000 resamples, seed 0).
    """
    summary: Dict[str, Dict[str, Dict[str, float]]] = {}
    for name in methods:
        recs = [r for r in records if r["method"] == name]
        metrics: Dict[str, List[float]] = {}
        for r in recs:
            for k, v in r["metrics"].items():
                metrics.setdefault(k, []).append(float(v))
            metrics.setdefault("time_s", []).append(float(r["time_s"]))
            metrics.setdefault("peak_mem_mb", []).append(float(r["peak_mem_mb"]))
        summary[name] = {k: _stat(v) for k, v in metrics.items()}
        summary[name]["n_examples"] = {"mean": float(len(recs)), "sem": float("nan"), "n": len(recs)}
    return summary


def write_csv(records: Sequence[Dict[str, Any]], path: Path) -> Path:
    """One row per (example, method) with every scalar metric, time and memory."""
    metric_keys: List[str] = []
    for r in records:
        for k in r["metrics"]:
            if k not in metric_keys:
                metric_keys.append(k)
    header = ["example", "method", "label", "target", "correct", "prob", "n_tokens"] + metric_keys + [
        "time_s", "peak_mem_mb"]
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(header)
    for r in records:
        writer.writerow([r["example"], r["method"], r["label"], r["target"], r["correct"], r["prob"],
                         r["n_tokens"]] + [r["metrics"].get(k, "") for k in metric_keys]
                        + [r["time_s"], r["peak_mem_mb"]])
    return write_atomic(path, buffer.getvalue())


#: the columns of ``results.csv`` that are not metrics
_CSV_FIELDS = ("example", "method", "label", "target", "correct", "prob", "n_tokens", "time_s", "peak_mem_mb")


def read_csv(path: Path) -> List[Dict[str, Any]]:
    """The records of a run's ``results.csv`` (:func:`write_csv`'s rows), without the deletion curves and scores.

    Enough for :func:`summarize`, :func:`write_csv` and :func:`write_markdown`;
    not for :func:`write_plot`, which needs the curves.
    """

    def optional(text: str, kind: Any) -> Any:
        return None if text == "" else kind(text)

    records = []
    with Path(path).open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            records.append({
                "example": int(row["example"]), "method": row["method"],
                "label": optional(row["label"], int), "target": int(row["target"]),
                "correct": optional(row["correct"], lambda t: t == "True"), "prob": float(row["prob"]),
                "n_tokens": int(row["n_tokens"]), "time_s": float(row["time_s"]),
                "peak_mem_mb": float(row["peak_mem_mb"]),
                "metrics": {k: float(v) for k, v in row.items() if k not in _CSV_FIELDS and v != ""},
            })
    return records


def _num(value: float, digits: int) -> str:
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text  # no "-0.000"


def format_stat(stat: Optional[Dict[str, float]], digits: int = 3) -> str:
    if not stat or stat["n"] == 0 or math.isnan(stat["mean"]):
        return "n/a"
    if math.isnan(stat["sem"]):
        return _num(stat["mean"], digits)
    return f"{_num(stat['mean'], digits)} ± {_num(stat['sem'], digits)}"


def _best(summary: Dict[str, Dict[str, Dict[str, float]]], methods: Sequence[str], key: str,
          higher: bool) -> Optional[str]:
    candidates = [(summary[m][key]["mean"], m) for m in methods
                  if key in summary[m] and not math.isnan(summary[m][key]["mean"]) and m != "random"]
    if len(candidates) < 2:
        return None
    return (max if higher else min)(candidates)[1]


def markdown_table(header: List[str], rows: List[List[str]]) -> List[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _card_note(meta: Dict) -> List[str]:
    """The model card's account of the model this run computed with: when and on which CPU kernels it was trained
    (a retrained model rounds differently on another CPU; ``benchmarks/results/models.md``)."""
    card = meta.get("model_card") or {}
    cpu = card.get("cpu") or {}
    if not cpu:
        return []
    from captum_prxai.models._cpu import PINNED_ENV

    pins = [f"{k}={cpu[k]}" for k in PINNED_ENV if cpu.get(k)]
    return ["", f"This run's model was trained {card.get('created', 'at an unrecorded time')} on "
                f"{cpu.get('processor') or 'an unrecorded CPU'} with {cpu.get('capability')} kernels"
                + (f" ({', '.join(pins)})" if pins else "") + " (its model card)."]


def _plot_note(meta: Dict[str, Any]) -> List[str]:
    """A line saying which examples ``deletion_curves.png`` averages, when not all of the run's (an extended run
    takes rows from ``results.csv``, which keeps no curves, so the plot is not redrawn)."""
    if "plot_examples" not in meta:
        return []
    shown, n = meta["plot_examples"], meta.get("n_examples")
    if shown is None:
        return ["", "`deletion_curves.png` was not redrawn: it averages the examples of an earlier run of this sample, "
                    "whose size was not recorded (rows taken from `results.csv` keep no curves)."]
    if n is not None and shown < n:
        return ["", f"`deletion_curves.png` averages the first {shown} of these {n} examples in sample order: rows "
                    "taken from `results.csv` keep no curves, so it was not redrawn."]
    return []


def retrained_notes(meta: Dict[str, Any]) -> List[Dict[str, Any]]:
    """A run's ``meta["reused_retrained"]`` as a list of notes, oldest first: one per ``reuse_retrained=True`` run
    whose rows it holds (the first runs wrote a single note as a dict)."""
    notes = meta.get("reused_retrained") or []
    return [notes] if isinstance(notes, dict) else list(notes)


def _retrained_note(meta: Dict[str, Any]) -> List[str]:
    """One line per ``reuse_retrained=True`` run whose rows this one holds (``meta["reused_retrained"]``): how many
    examples' rows were taken under another cache key, of which methods, and how the spot check came out."""
    lines: List[str] = []
    for note in retrained_notes(meta):
        methods = note.get("methods")
        check = (f"Before they were taken, examples {', '.join(str(e) for e in note['spot_check'])} were computed "
                 f"again: every such method's comprehensiveness and sufficiency there are within "
                 f"{note['max_metric_difference']:.1e} of the stored rows, and the explained-class probabilities of "
                 f"the taken examples within {note['max_prob_difference']:.1e} (tolerance {note['tolerance']:g}).")
        if note.get("every_method", methods is None):  # notes without the flag predate per-method notes
            lines += ["", f"The rows of {note['examples']} of these examples were made by a former model trained with "
                          "the same recipe (weights not bit-for-bit the same; `reuse_retrained`). " + check +
                          " Each example's rows come from one model, so the methods stay paired."]
        elif note.get("this_model"):
            names = ", ".join(_label(m) for m in methods)
            n = note["examples"]
            added = [f"{_label(m)} on {'all' if k == n else k} of them" for m, k in note["this_model"].items()]
            lines += ["", f"The rows of {names} on {n} of these examples were made by a former model trained with "
                          "the same recipe (weights not bit-for-bit the same; `reuse_retrained`). " + check + " The "
                          f"rows of {' and '.join(added)} were made by this model: there their paired differences "
                          "with the former model's rows span the two models."]
        else:
            names = ", ".join(_label(m) for m in methods)
            lines += ["", f"The rows of {names} on {note['examples']} of these examples were stored under another "
                          f"cache key of {'that method' if len(methods) == 1 else 'those methods'} alone (the model's "
                          "and the other methods' keys were this run's, so the method's options or inputs, such as a "
                          "scores file, had changed; `reuse_retrained`). " + check]
    return lines


def write_markdown(summary: Dict[str, Dict[str, Dict[str, float]]], methods: Sequence[str], meta: Dict[str, Any],
                   path: Path, bins: Sequence[float] = (), settings: Optional[MetricSettings] = None) -> Path:
    """Markdown report: settings, the method x metric table (mean ± s.e.), per-bin tables.

    Args:
        settings: The run's metric settings (default: read from ``meta``);
            ``bins``, when given, replaces theirs.
    """
    settings = settings or MetricSettings.from_mapping(meta)
    bins = tuple(bins) or tuple(settings.bins)
    lines = ["# Faithfulness benchmark", ""]
    lines.append(
        f"Dataset **{meta.get('dataset')}**, {meta.get('n_examples')} examples, model `{meta.get('model')}` "
        f"on {meta.get('device')}. Tokens removed by **{settings.mode}**"
        + (f" (replaced by [{settings.replacement.upper()}])" if settings.mode == "replace" else "")
        + f"; bins {', '.join(_pct(b) + '%' for b in bins)}; "
        f"{settings.steps} deletion steps; log-odds and accuracy at "
        f"{_pct(settings.log_odds_fraction)}% / {_pct(settings.accuracy_fraction)}%; "
        + (f"inputs truncated to {meta['max_length']} tokens; " if meta.get("max_length") else "")
        + f"seed {meta.get('seed')}."
        + (" The explained (last) token is never removed: a decoder classifier reads its class there."
           if meta.get("protect_explained") else "")
    )
    if meta.get("model_accuracy") is not None:
        lines += ["", f"Model accuracy on these examples before any removal: {meta['model_accuracy']:.3f}; "
                      f"mean probability of the predicted class: {meta.get('mean_prob', float('nan')):.3f}."]
    lines += _card_note(meta) + _plot_note(meta) + _retrained_note(meta)
    lines += ["", "Mean ± standard error over examples; ↑ higher is better, ↓ lower is better; "
                  "the best non-random method per column is in bold.", ""]
    header = ["Method", "n"] + [h for _, h, _ in MAIN_COLUMNS] + ["Time / example (s)", "Peak memory (MB)"]
    best = {k: _best(summary, methods, k, hi) for k, _, hi in MAIN_COLUMNS}
    rows = []
    for m in methods:
        s = summary.get(m, {})
        row = [_label(m), str(int(s.get("n_examples", {}).get("n", 0)))]
        for k, _, _ in MAIN_COLUMNS:
            cell = format_stat(s.get(k))
            row.append(f"**{cell}**" if best[k] == m else cell)
        row += [format_stat(s.get("time_s"), 4), format_stat(s.get("peak_mem_mb"), 1)]
        rows.append(row)
    lines += markdown_table(header, rows)
    for metric, title in (("comprehensiveness", "Comprehensiveness per bin ↑"),
                          ("sufficiency", "Sufficiency per bin ↓")):
        if not bins:
            continue
        lines += ["", f"## {title}", ""]
        header = ["Method"] + [f"{_pct(b)}%" for b in bins]
        rows = [[_label(m)] + [format_stat(summary.get(m, {}).get(f"{metric}@{_pct(b)}")) for b in bins] for m in methods]
        lines += markdown_table(header, rows)
    if meta.get("errors"):
        lines += ["", f"**{meta['errors']} explanation(s) failed** and are left out; see the warnings of the run."]
    return write_atomic(path, "\n".join(lines) + "\n")


def write_summary_json(summary: Dict[str, Any], meta: Dict[str, Any], path: Path) -> Path:
    """The summary and the settings as JSON (NaN written as null)."""

    def clean(obj: Any) -> Any:
        if isinstance(obj, float) and math.isnan(obj):
            return None
        if isinstance(obj, dict):
            return {k: clean(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [clean(v) for v in obj]
        return obj

    return write_atomic(path, json.dumps(clean({"meta": meta, "methods": summary}), indent=2))


def write_plot(records: Sequence[Dict[str, Any]], methods: Sequence[str], path: Path) -> Path:
    """Mean deletion curves (most- and least-relevant first) with ± s.e. bands, one line per method."""
    import matplotlib
    import numpy as np
    from matplotlib.figure import Figure  # no pyplot: leaves the user's backend alone

    from captum_prxai.viz.curves import draw_curves

    shown = [m for m in methods if any(r["method"] == m for r in records)]
    # distinct colours for up to 20 methods; the legend sits below the panels so it hides no curve
    palette = matplotlib.colormaps["tab20" if len(shown) > 10 else "tab10"]
    colours = {m: palette(i % palette.N) for i, m in enumerate(shown)}
    legend_rows = (len(shown) + 3) // 4
    fig = Figure(figsize=(11, 4.2 + 0.28 * legend_rows))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, key, title in ((axes[0], "curve_most", "Most relevant removed first (lower is better)"),
                           (axes[1], "curve_least", "Least relevant removed first (higher is better)")):
        means, sems, fractions = {}, {}, None
        for m in shown:
            arr = np.asarray([r[key] for r in records if r["method"] == m], dtype=float)
            fractions = np.asarray(next(r["curve_fractions"] for r in records if r["method"] == m)) * 100
            means[_label(m)] = arr.mean(axis=0)
            if arr.shape[0] > 1:
                sems[_label(m)] = arr.std(axis=0, ddof=1) / np.sqrt(arr.shape[0])
        draw_curves(ax, means, fractions, bands=sems, colors={_label(m): colours[m] for m in shown},
                    dashed=(_label("random"),))
        ax.set_title(title, fontsize=10)
        ax.ticklabel_format(axis="y", useOffset=False)
        ax.set_xlabel("tokens removed (%)")
    axes[0].set_ylabel("probability of the predicted class")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.065 * legend_rows, 1, 1))
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=120)
    return write_atomic(path, image.getvalue())


#: (summary key, header) of the matrix tables; all but sufficiency are higher-is-better
MATRIX_COLUMNS = [("comprehensiveness", "Comp. ↑"), ("sufficiency", "Suff. ↓"), ("aopc_most", "AOPC ↑")]


def _per_example(csv_path: Path, metric: str) -> Dict[str, Dict[str, float]]:
    """``{method: {example: value}}`` of one metric from a run's ``results.csv`` (rows without it left out)."""
    values: Dict[str, Dict[str, float]] = {}
    with Path(csv_path).open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if row.get(metric) not in (None, ""):
                values.setdefault(row["method"], {})[row["example"]] = float(row[metric])
    return values


def paired_difference(a: Dict[str, float], b: Dict[str, float]) -> Dict[str, float]:
    """Mean and s.e. of the per-example differences ``a - b`` on the examples both have."""
    common = sorted(set(a) & set(b))
    mean, sem = mean_sem([a[e] - b[e] for e in common])
    return {"mean": mean, "sem": sem, "n": len(common)}


def _paired_differences(csv_path: Path, pairs: Sequence[Tuple[str, str]],
                        metric: str = "comprehensiveness") -> Dict[Tuple[str, str], Dict[str, float]]:
    """Per-example differences ``a - b`` of a metric on the examples both methods explained: mean and s.e."""
    values = _per_example(csv_path, metric)
    return {(a, b): paired_difference(values[a], values[b]) for a, b in pairs if a in values and b in values}


def write_matrix(cells: Sequence[Any], path: Path, title: str = "Faithfulness matrix",
                 intro: str = "", control: str = "random", pairs: Sequence[Tuple[str, str]] = ()) -> Path:
    """Collect several benchmark runs into one Markdown file, with each method's rank per run.

    Args:
        cells: ``(heading, out_dir)`` pairs, one per finished :func:`run_benchmark`
            run (folders without a ``summary.json`` are skipped).
        path: The Markdown file to write.
        title: Its title; ``intro``: a paragraph under it.
        control: The control method, listed but not ranked.
        pairs: ``(a, b)`` method pairs whose per-example differences in
            comprehensiveness and in sufficiency (``a - b``, mean ± standard
            error over the examples both explained; from each run's
            ``results.csv``) get a table each: a paired comparison, tighter
            than comparing two means.

    First an overview (method x run comprehensiveness, best in bold, and each
    method's mean rank over the runs it took part in), then one table per run
    (method x comprehensiveness, sufficiency, AOPC, time), methods sorted by
    comprehensiveness and ranked 1 (best) onwards.
    """
    runs = []  # (heading, meta, methods, paired differences) of each finished run
    for heading, out_dir in cells:
        summary_file, csv_file = Path(out_dir) / "summary.json", Path(out_dir) / "results.csv"
        if summary_file.is_file():
            data = json.loads(summary_file.read_text())
            diffs = {metric: _paired_differences(csv_file, pairs, metric) if pairs and csv_file.is_file() else {}
                     for metric in ("comprehensiveness", "sufficiency")}
            runs.append((heading, data["meta"], data["methods"], diffs))
    ranks: Dict[str, List[int]] = {}
    sections: List[str] = []
    for heading, meta, methods, _ in runs:
        order = sorted(methods, key=lambda m: -methods[m]["comprehensiveness"]["mean"])
        ranked = [m for m in order if m != control]
        for place, m in enumerate(ranked, 1):
            ranks.setdefault(m, []).append(place)
        accuracy = meta.get("model_accuracy")
        about = f"Model `{meta.get('model')}`, {meta.get('n_examples')} examples, at most {meta.get('max_length')} tokens"
        about += f", model accuracy on them {accuracy:.3f}." if accuracy is not None else "."
        rows = []
        for m in order:
            row = [_label(m)] + [format_stat(methods[m].get(key)) for key, _ in MATRIX_COLUMNS]
            row += [_num(methods[m]["time_s"]["mean"], 3) if "time_s" in methods[m] else "",
                    str(ranked.index(m) + 1) if m in ranked else "–"]
            rows.append(row)
        sections += [f"## {heading}", "", about, ""]
        sections += markdown_table(["Method"] + [h for _, h in MATRIX_COLUMNS] + ["Time / example (s)", "Rank"], rows)
        sections.append("")
    lines = [f"# {title}", ""] + ([intro, ""] if intro else [])
    if runs:
        by_rank = sorted(ranks, key=lambda m: (sum(ranks[m]) / len(ranks[m]), m))
        everyone = list(dict.fromkeys(by_rank + [m for _, _, methods, _ in runs for m in methods]))
        bests = [max((k for k in methods if k != control), key=lambda k: methods[k]["comprehensiveness"]["mean"],
                     default=None) for _, _, methods, _ in runs]
        lines += ["## Comprehensiveness ↑ in every run (best in bold)", ""]
        rows = []
        for m in everyone:
            row = [_label(m)]
            for (_, _, methods, _), best in zip(runs, bests):
                cell = format_stat(methods[m]["comprehensiveness"]) if m in methods else ""
                row.append(f"**{cell}**" if m == best and cell else cell)
            row += [f"{sum(ranks[m]) / len(ranks[m]):.2f}" if m in ranks else "–", str(len(ranks.get(m, [])))]
            rows.append(row)
        lines += markdown_table(["Method"] + [run[0] for run in runs] + ["Mean rank", "Runs ranked"], rows)
        lines += ["", "Mean rank: place among the run's methods on comprehensiveness (1 = best), averaged over "
                  "the runs the method took part in (runs differ in their method lists, so compare mean ranks "
                  "of methods with the same runs); the control is not ranked.", ""]
        for metric, better in (("comprehensiveness", "> 0: a is better"), ("sufficiency", "< 0: a is better")):
            shown = [pair for pair in pairs if any(pair in run[3][metric] for run in runs)]
            if not shown:
                continue
            lines += [f"## Paired differences in {metric} (a − b, same examples; {better})", ""]
            rows = [[f"{_label(a)} − {_label(b)}"]
                    + [format_stat(run[3][metric][(a, b)]) if (a, b) in run[3][metric] else "" for run in runs]
                    for a, b in shown]
            lines += markdown_table(["Pair"] + [run[0] for run in runs], rows)
            lines.append("")
    lines += sections
    return write_atomic(path, "\n".join(lines))


def format_signed(stat: Dict[str, float]) -> str:
    """``+0.012 ± 0.004`` (a leading sign always, the minus as U+2212)."""
    mean = stat["mean"]
    return f"{'+' if mean >= 0 else '−'}{abs(mean):.3f} ± {stat['sem']:.3f}"


def paired_verdict(comp: Dict[str, float], suff: Dict[str, float]) -> str:
    """Each metric's side of a paired difference ``default − other``: ahead or behind by more than one standard
    error, else level."""
    def side(d: float, se: float, better_up: bool) -> str:
        d = d if better_up else -d
        return "ahead" if d > se else ("behind" if d < -se else "level")

    return f"{side(comp['mean'], comp['sem'], True)} / {side(suff['mean'], suff['sem'], False)}"


def default_check(csv_path: Path, default: str, rivals: Sequence[str] = ("gae", "ig"),
                  control: str = "random") -> Dict[str, Any]:
    """One run's default against every other method, paired per example, on both metrics.

    Returns ``{"n", "default": {metric: stat}, "others": {method: {metric: paired stat of default − method}},
    "goal": {rival: bool}, "worst": (method, metric, paired loss stat) or None}``. The goal against a rival
    holds when the default is first or level with it within one paired standard error on comprehensiveness
    **and** sufficiency; the worst case is the largest paired loss (comprehensiveness: rival − default;
    sufficiency: default − rival) to any method but the control.
    """
    metrics = ("comprehensiveness", "sufficiency")
    values = {metric: _per_example(csv_path, metric) for metric in metrics}
    if default not in values["comprehensiveness"]:
        raise KeyError(f"{csv_path}: no rows for the default {default!r}")
    own = {metric: dict(zip(("mean", "sem"), mean_sem(list(values[metric].get(default, {}).values()))))
           for metric in metrics}
    others: Dict[str, Dict[str, Dict[str, float]]] = {}
    worst = None
    for method in values["comprehensiveness"]:
        if method in (default, control):
            continue
        others[method] = {}
        for metric in metrics:
            diff = paired_difference(values[metric].get(default, {}), values[metric].get(method, {}))
            others[method][metric] = diff
            loss = -diff["mean"] if metric == "comprehensiveness" else diff["mean"]
            if diff["n"] and (worst is None or loss > worst[2]["mean"]):
                worst = (method, metric, {"mean": loss, "sem": diff["sem"]})
    goal = {}
    for rival in rivals:
        if rival in others:
            comp, suff = others[rival]["comprehensiveness"], others[rival]["sufficiency"]
            goal[rival] = comp["mean"] >= -comp["sem"] and suff["mean"] <= suff["sem"]
    n = len(values["comprehensiveness"][default])
    return {"n": n, "default": own, "others": others, "goal": goal, "worst": worst}


#: short names of methods in the compact form of :func:`default_row`
_SHORT = {"ig": "LIG", "attnlrp": "AttnLRP"}


def default_row(check: Dict[str, Any], default: str, columns: Sequence[str], rivals: Sequence[str],
                short: bool = False) -> List[str]:
    """One run's :func:`default_check` as table cells: the default, n, its metrics, its paired differences with
    ``columns``, the goal against ``rivals`` and the worst case. ``short``: the README's compact form (no
    ahead/level/behind words, short method and metric names)."""
    name = (lambda m: _SHORT.get(m, _label(m))) if short else _label
    own = check["default"]
    row = [_label(default), str(check["n"]),
           " / ".join(f"{own[m]['mean']:.3f}".replace("-", "−") for m in ("comprehensiveness", "sufficiency"))]
    for c in columns:
        o = check["others"].get(c)
        pair = f"{format_signed(o['comprehensiveness'])} / {format_signed(o['sufficiency'])}" if o else ""
        if o and not short:
            pair += f" ({paired_verdict(o['comprehensiveness'], o['sufficiency'])})"
        row.append(pair or ("(not run)" if short else ""))
    failed = [name(r) for r in rivals if r in check["goal"] and not check["goal"][r]]
    absent = [name(r) for r in rivals if r not in check["goal"]]
    goal = ("met" if not failed else f"not met ({', '.join(failed)})" if short
            else "not met: " + ", ".join(failed))
    row.append(goal + (f" ({', '.join(absent)} not run)" if absent else ""))
    w = check["worst"]
    metric = {"comprehensiveness": "comp.", "sufficiency": "suff."} if short else {}
    row.append(f"{format_signed(w[2])} {metric.get(w[1], w[1])} to {name(w[0])}" if w else "")
    return row


def write_default_check(cells: Sequence[Tuple[str, Path, str]], path: Path,
                        columns: Sequence[str] = ("gae", "ig", "attnlrp", "kernel-shap", "lime"),
                        rivals: Sequence[str] = ("gae", "ig"), title: str = "The default in the matrix",
                        intro: str = "") -> Path:
    """One row per finished run: the default's metrics, its paired differences with ``columns``, whether the goal
    against ``rivals`` holds, and its worst case (see :func:`default_check`).

    Args:
        cells: ``(heading, out_dir, default method)``; runs without a ``results.csv`` are listed as not run.
        path: The Markdown file to write.
        columns: Methods whose paired differences get a column (blank where a run lacks them).
        rivals: The methods of the goal.
    """
    header = (["run", "default", "n", "comp. ↑ / suff. ↓"] + [f"− {_label(c)}" for c in columns]
              + [f"goal vs {' and '.join(_label(r) for r in rivals)}", "worst case (largest paired loss)"])
    rows, missing = [], []
    for heading, out_dir, default in cells:
        csv_file = Path(out_dir) / "results.csv"
        try:
            check = default_check(csv_file, default, rivals)
        except (FileNotFoundError, KeyError):
            missing.append(f"{heading} (`{default}`)")
            continue
        rows.append([heading] + default_row(check, default, columns, rivals))
    lines = [f"# {title}", ""] + ([intro, ""] if intro else [])
    lines += ["Each cell: paired difference default − method, mean ± standard error over the same examples, "
              "comprehensiveness / sufficiency (comprehensiveness: > 0 means the default is better; sufficiency: "
              "< 0 means the default is better), and each metric's side: ahead or behind by more than one "
              "standard error, else level. The goal holds against a rival when the default is not behind it on "
              "either metric. Worst case: the largest paired loss to any method but the random control "
              "(> 0 is a loss).", ""]
    lines += markdown_table(header, rows)
    if missing:
        lines += ["", "Not run with the default yet: " + "; ".join(missing) + "."]
    return write_atomic(path, "\n".join(lines) + "\n")


def write_bin_breakdown(cells: Sequence[Tuple[str, Path, str]], path: Path,
                        rivals: Sequence[str] = ("ig", "attnlrp"), bins: Sequence[str] = ("1", "5", "10", "20", "50"),
                        title: str = "Where the default gains and loses, by bin", intro: str = "") -> Path:
    """Per run and rival, the paired difference default − rival at each removal bin, comprehensiveness and
    sufficiency (``comprehensiveness@<bin>``, ``sufficiency@<bin>`` of ``results.csv``): which part of the ranking
    (the top 1 %, ..., the top half) a gap comes from. A loss is marked in bold when larger than one standard error.

    Args:
        cells: ``(heading, out_dir, default method)``; runs without a ``results.csv`` or the rival are skipped.
        path: The Markdown file to write.
        rivals: The methods compared with.
        bins: The bins' percentages, as the CSV's column suffixes.
    """
    lines = [f"# {title}", ""] + ([intro, ""] if intro else [])
    lines += ["Paired difference default − rival, mean ± standard error over the same examples (comprehensiveness: "
              "> 0 means the default is better; sufficiency: < 0 means the default is better); a loss larger than "
              "one standard error in bold.", ""]
    header = ["run", "rival", "n"] + [f"comp. @{b}%" for b in bins] + [f"suff. @{b}%" for b in bins]
    rows = []
    for heading, out_dir, default in cells:
        csv_file = Path(out_dir) / "results.csv"
        if not csv_file.is_file():
            continue
        columns = {(metric, b): _per_example(csv_file, f"{metric}@{b}") for metric in ("comprehensiveness",
                                                                                        "sufficiency") for b in bins}
        for rival in rivals:
            first = columns[("comprehensiveness", bins[0])]
            if default not in first or rival not in first:
                continue
            row = [heading, _label(rival), str(len(first[default]))]
            for metric in ("comprehensiveness", "sufficiency"):
                for b in bins:
                    diff = paired_difference(columns[(metric, b)][default], columns[(metric, b)][rival])
                    loss = -diff["mean"] if metric == "comprehensiveness" else diff["mean"]
                    row.append(f"**{format_signed(diff)}**" if loss > diff["sem"] else format_signed(diff))
            rows.append(row)
    lines += markdown_table(header, rows)
    return write_atomic(path, "\n".join(lines) + "\n")
