"""The generation default: the worst-case rule of the default search, on the generation benchmark's tune halves.

Reads the records of ``benchmarks/generation.py`` (``results/generation/cache.jsonl``) and, per model:

1. **The rule, on the tune halves.** For every candidate (the PageRank methods: the current default, the four
   presets and the default search's research variants that were run), its paired loss to the best other candidate
   of each tune cell (source × tune half), on comprehensiveness and on sufficiency
   (:func:`default_search.cell_losses`: the loss is best-other − candidate for comprehensiveness and
   candidate − best-other for sufficiency, so positive means worse). The rule takes the candidate whose largest loss
   (its worst case) is smallest; the next-worst loss breaks a tie. Only prompts that every candidate explained
   count (the comparison is paired); a candidate run on under half the prompts of the cell's best-covered one
   sits that cell out.
2. **The check, on the held-out halves.** The chosen candidate against each other candidate and against Captum's
   LIG and FeatureAblation and AttnLRP (where its precomputed records exist), paired on the prompts both
   explained: ahead / level / behind by one standard error
   (:func:`captum_prxai.bench.report.paired_verdict`).

    python benchmarks/generation_default.py            # writes results/generation/default_choice.md

Nothing is computed here: run ``generation.py`` with the candidates first (``--half tune``), then with the
chosen one on the held-out halves.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' own modules
from default_search import cell_losses  # noqa: E402
from generation import CAPTUM_METHODS, DEFAULT, MODELS, OUT, _label, _ordered, collect  # noqa: E402
from research_methods import RESEARCH_VARIANTS  # noqa: E402

#: the candidates of the rule: the PageRank presets and the research variants, among them the former default
#: (``generation.FORMER_DEFAULT``); ``pr-xai``, the library's current choice, is not a candidate of its own but
#: an alias of one (raw attention, rollout and Captum's methods are rivals, never picked)
PRESETS = ("pr-a", "pr-g", "pr-ag", "pr-tag")
CANDIDATES = PRESETS + tuple(RESEARCH_VARIANTS)
METRICS = ("comprehensiveness", "sufficiency")

#: one loss: (loss, its s.e., source, metric, the best other candidate)
Loss = Tuple[float, float, str, str, str]


def _fmt(mean: float, sem: float) -> str:
    text = f"{mean:+.3f}".replace("-", "−")
    return text if math.isnan(sem) else f"{text} ± {sem:.3f}"


def tune_losses(cells: Dict[Tuple[str, str, str], Dict[str, Dict[Any, Dict[str, Any]]]], model: str,
                min_prompts: int = 2) -> Tuple[Dict[str, List[Loss]], Dict[str, int]]:
    """Every candidate's losses to the best other candidate on ``model``'s tune cells.

    A candidate takes part in a cell if it explained at least half as many prompts as the cell's best-covered
    candidate; the paired comparison runs on the prompts that every candidate taking part explained.

    Returns:
        ``({candidate: [loss, ...]}, {source: prompts compared})``.
    """
    losses: Dict[str, List[Loss]] = {}
    prompts: Dict[str, int] = {}
    for (m, source, half), by_method in cells.items():
        if m != model or half != "tune":
            continue
        present = {c: by_method[c] for c in CANDIDATES if c in by_method}
        if len(present) < 2:
            continue
        # a candidate run on under half the prompts of the best-covered one would shrink everyone's sample
        most = max(len(r) for r in present.values())
        taking = {c: r for c, r in present.items() if 2 * len(r) >= most}
        common = set.intersection(*(set(r) for r in taking.values()))
        if len(common) < min_prompts:
            continue
        prompts[source] = len(common)
        values = {metric: {c: {e: r[e][metric] for e in common} for c, r in taking.items()} for metric in METRICS}
        for c, by_metric in cell_losses(values, sorted(taking), control="random").items():
            for metric, loss in by_metric.items():
                losses.setdefault(c, []).append((loss["loss"], loss["sem"], source, metric, loss["best"]))
    return losses, prompts


def choose(losses: Dict[str, List[Loss]]) -> Optional[str]:
    """The candidate with the smallest worst case (then the smallest next-worst loss), among those ranked on the
    most cells."""
    if not losses:
        return None
    most = max(len(found) for found in losses.values())
    ranked = {c: sorted((x[0] for x in found), reverse=True) for c, found in losses.items() if len(found) == most}
    return min(ranked, key=lambda c: ranked[c])


def _alias_note(cells: Dict[Tuple[str, str, str], Dict[str, Dict[Any, Dict[str, Any]]]], model: str,
                chosen: str) -> str:
    """Whether the library's default (``pr-xai`` records, with the spec they ran) gives the choice's figures."""
    gaps = [abs(r[metric] - by_method[chosen][e][metric])
            for (m, _, _), by_method in cells.items() if m == model and DEFAULT in by_method and chosen in by_method
            for e, r in by_method[DEFAULT].items() if e in by_method[chosen] for metric in METRICS]
    if not gaps:
        return f" The library's default (`{DEFAULT}`) has no records on these prompts yet."
    return (f" The library's default (`{DEFAULT}`, recorded on {len(gaps) // 2} prompts) matches it to "
            f"{max(gaps):.1e} on both metrics." if max(gaps) < 1e-6 else
            f" The library's default (`{DEFAULT}`) differs from it (by up to {max(gaps):.3f}): update "
            "`captum_prxai.recommended.GENERATION_CHOICES`.")


def held_out_rows(cells: Dict[Tuple[str, str, str], Dict[str, Dict[Any, Dict[str, Any]]]], model: str,
                  chosen: str) -> List[List[str]]:
    """``chosen`` against every other method on ``model``'s held-out cells, paired per prompt."""
    from captum_prxai.bench.report import paired_difference, paired_verdict

    rows = []
    for cell in _ordered(cells):
        m, source, half = cell
        by_method = cells[cell]
        if m != model or half != "holdout" or chosen not in by_method:
            continue
        others = [c for c in CANDIDATES if c in by_method and c != chosen] + [
            c for c in CAPTUM_METHODS + ("attnlrp",) if c in by_method]
        for other in others:
            diffs = {metric: paired_difference({e: r[metric] for e, r in by_method[chosen].items()},
                                               {e: r[metric] for e, r in by_method[other].items()})
                     for metric in METRICS}
            comp, suff = diffs["comprehensiveness"], diffs["sufficiency"]
            if comp["n"] < 2:
                continue
            rows.append([source, _label(other), str(comp["n"]), _fmt(comp["mean"], comp["sem"]),
                         _fmt(suff["mean"], suff["sem"]), paired_verdict(comp, suff)])
    return rows


def report(records: Iterable[Dict[str, Any]], command: str) -> str:
    """The Markdown page: per model, the rule's worst cases on the tune halves and the held-out check."""
    from captum_prxai.bench.report import markdown_table

    cells = collect(records)
    lines = ["# The generation default: the worst-case rule on the tune halves", "", "```", command, "```", "",
             "Data: `results/generation/cache.jsonl` (`benchmarks/generation.py`; protocol in its summary.md). "
             "Loss: paired difference to the best other candidate of the tune cell (comprehensiveness: best − "
             "candidate; sufficiency: candidate − best), mean ± s.e. over the prompts every candidate explained; "
             "positive = worse. The rule takes the smallest worst case. Candidates: the PageRank methods; raw "
             "attention, rollout and Captum's methods are rivals, never picked.", ""]
    order = {m: i for i, m in enumerate(MODELS)}
    for model in sorted({cell[0] for cell in cells}, key=lambda m: (order.get(m, len(order)), m)):
        losses, prompts = tune_losses(cells, model)
        if not losses:
            continue
        chosen = choose(losses)
        lines += [f"## {model}", "", "Tune cells: " + ", ".join(f"{s} ({n} prompts)" for s, n in prompts.items())
                  + ".", ""]
        rows = []
        for c, found in sorted(losses.items(), key=lambda kv: sorted((x[0] for x in kv[1]), reverse=True)):
            ordered = sorted(found, key=lambda x: -x[0])
            worst = ordered[0]
            nxt = ordered[1] if len(ordered) > 1 else None
            rows.append([("**" + _label(c) + "**") if c == chosen else _label(c), f"`{c}`",
                         _fmt(worst[0], worst[1]), f"{worst[2]} {worst[3]}", _label(worst[4]),
                         f"{_fmt(nxt[0], nxt[1])} ({nxt[2]} {nxt[3]})" if nxt else "–", str(len(found))])
        lines += markdown_table(["Candidate", "Name", "Worst case", "Where", "Best other there", "Next worst",
                                 "Losses"], rows)
        lines += ["", f"The rule's choice: **{_label(chosen)}** (`{chosen}`)." + _alias_note(cells, model, chosen), ""]
        held = held_out_rows(cells, model, chosen)
        if held:
            lines += [f"Held out: {_label(chosen)} − method, paired (comp. > 0 and suff. < 0: the choice is better):",
                      ""]
            lines += markdown_table(["Source", "Method", "Prompts", "Δ comp.", "Δ suff.", "Choice (comp. / suff.)"],
                                    held)
            lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(OUT), help="the generation benchmark's folder")
    args = parser.parse_args(argv)
    from captum_prxai.bench.cache import RecordCache, write_atomic

    out = Path(args.out)
    records = RecordCache(out / "cache.jsonl").read().values()
    command = "python benchmarks/generation_default.py " + shlex.join(list(sys.argv[1:] if argv is None else argv))
    path = write_atomic(out / "default_choice.md", report(records, command.strip()))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
