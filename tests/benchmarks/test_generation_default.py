"""benchmarks/generation_default.py: the worst-case rule on hand-made generation records."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def rule(benchmark_script):
    return benchmark_script("generation_default.py")


def _records(values):
    """``values[(source, half)][method] = [(comp, suff), ...]`` -> generation cache records."""
    out = []
    for (source, half), by_method in values.items():
        for method, pairs in by_method.items():
            for example, (comp, suff) in enumerate(pairs):
                out.append({"model": "m", "source": source, "half": half, "example": example, "method": method,
                            "comprehensiveness": comp, "sufficiency": suff})
    return out


def test_losses_are_paired_differences_to_the_best_other(rule):
    records = _records({("cloze", "tune"): {
        "pr-tag": [(0.5, 0.1), (0.7, 0.3)],
        "pr-g": [(0.4, 0.2), (0.4, 0.2)],
        "pr-ag": [(0.1, 0.5), (0.2, 0.4)],
        "random": [(0.9, 0.0), (0.9, 0.0)],  # the control: never a best other
    }})
    losses, prompts = rule.tune_losses(rule.collect(records), "m")
    assert prompts == {"cloze": 2}
    by = {(c, metric): (loss, best) for c, found in losses.items() for loss, _, _, metric, best in found}
    # pr-g's best other on comprehensiveness is pr-tag (mean 0.6): per prompt 0.1 and 0.3 -> 0.2
    assert by[("pr-g", "comprehensiveness")][1] == "pr-tag"
    assert by[("pr-g", "comprehensiveness")][0] == pytest.approx(0.2)
    # pr-tag's best other on sufficiency (lower is better) is pr-g (0.2): pr-tag − pr-g = −0.1 and +0.1 -> 0
    assert by[("pr-tag", "sufficiency")] == (pytest.approx(0.0), "pr-g")
    assert "random" not in losses


def test_rule_takes_the_smallest_worst_case_and_breaks_ties_by_the_next(rule):
    losses = {"a": [(0.3, 0, "s", "comprehensiveness", "b"), (0.0, 0, "s", "sufficiency", "b")],
              "b": [(0.1, 0, "s", "comprehensiveness", "a"), (0.1, 0, "s", "sufficiency", "a")],
              "c": [(0.1, 0, "s", "comprehensiveness", "a"), (0.05, 0, "s", "sufficiency", "a")]}
    assert rule.choose(losses) == "c"
    assert rule.choose({}) is None


def test_a_candidate_run_on_fewer_prompts_does_not_shrink_the_sample(rule):
    records = _records({("cloze", "tune"): {
        "pr-tag": [(0.5, 0.1), (0.7, 0.3), (0.6, 0.2)],
        "pr-g": [(0.4, 0.2), (0.4, 0.2), (0.4, 0.2)],
        "pr-a": [(0.1, 0.5)],
        "pr-ag": [(0.1, 0.5), (0.2, 0.4)],
    }})
    losses, prompts = rule.tune_losses(rule.collect(records), "m")
    # pr-a (1 of 3 prompts) is left out; pr-ag (2 of 3) takes part, on the two prompts all three share
    assert prompts == {"cloze": 2} and set(losses) == {"pr-tag", "pr-g", "pr-ag"}


def test_report_names_the_choice_and_checks_it_held_out(rule):
    records = _records({
        ("cloze", "tune"): {"pr-tag": [(0.5, 0.1), (0.7, 0.3)], "pr-g": [(0.4, 0.2), (0.4, 0.2)]},
        ("cloze", "holdout"): {"pr-tag": [(0.5, 0.1), (0.6, 0.2), (0.8, 0.1)],
                               "lig": [(0.3, 0.3), (0.2, 0.2), (0.4, 0.3)]},
    })
    page = rule.report(records, "python benchmarks/generation_default.py")
    assert "The rule's choice: **PR-TAG** (`pr-tag`). The library's default (`pr-xai`) has no records" in page
    held = [line for line in page.splitlines() if line.startswith("| cloze | Captum LIG")]
    assert held and held[0].rstrip().endswith("| ahead / ahead |")


def test_the_default_is_checked_against_the_choice_and_former_records_count_as_the_former_default(rule):
    tune = {"pr-tag": [(0.5, 0.1), (0.7, 0.3)], "pr-g": [(0.4, 0.2), (0.4, 0.2)]}
    records = _records({("cloze", "tune"): tune})
    same = [dict(r, method="pr-xai", spec={"walks": "positive"}) for r in records if r["method"] == "pr-tag"]
    page = rule.report(records + same, "cmd")
    assert "The library's default (`pr-xai`, recorded on 2 prompts) matches it to 0.0e+00" in page
    other = [dict(r, comprehensiveness=r["comprehensiveness"] + 0.1) for r in same]
    assert "differs from it (by up to 0.100)" in rule.report(records + other, "cmd")
    # a pr-xai record without its spec was made before the generation default existed: the former default's
    former = [dict(r, method="pr-xai") for r in records if r["method"] == "pr-g"]
    cells = rule.collect(former)
    assert set(cells[("m", "cloze", "tune")]) == {"pr-tag-pm-lp"}
