"""benchmarks/signed_contrast.py: the annotated sentences and the table code, on tiny hand-made inputs."""

from __future__ import annotations

import re

import pytest


@pytest.fixture(scope="module")
def sc(benchmark_script):
    return benchmark_script("signed_contrast.py")


def _case(sc, method, scores, for_words, against_words, predicted=True):
    words = [f"w{i}" for i in range(len(scores))]
    return sc.Case(method, "s", "positive", predicted, words, list(scores), list(for_words), list(against_words))


def test_sentences_are_contrasts_with_each_annotated_word_once(sc):
    assert len(sc.SENTENCES) >= 40
    contrasts = 0
    for sentence, pos, neg in sc.SENTENCES:
        words = re.findall(r"\w+", sentence.lower())
        for word in (*pos, *neg):
            assert words.count(word) == 1, (sentence, word)
        assert not set(pos) & set(neg)
        contrasts += bool(pos and neg)
    assert contrasts >= 40


def test_ranks_run_from_top_to_bottom_and_ties_share_their_mean(sc):
    assert sc._ranks([0.3, 0.1, 0.2]) == [0.0, 1.0, 0.5]
    assert sc._ranks([0.5, 0.0, 0.0]) == [0.0, 0.75, 0.75]
    assert sc._ranks([0.2]) == [0.0]


def test_bottom_k_takes_the_lowest_scores(sc):
    assert sc._bottom([0.3, -0.2, 0.1, -0.5], 2) == [3, 1]
    assert sc._bottom([0.3, 0.1], 0) == []


def test_summary_pools_words_over_explanations(sc):
    # explanation 1: words w0..w3; FOR w0, AGAINST w2, w3. Scores: w2 negative, w3 zero (not negative).
    one = _case(sc, "m", [0.5, 0.1, -0.2, 0.0], [0], [2, 3])
    # explanation 2: FOR w0 (negative: a miss), AGAINST w1 (negative and lowest)
    two = _case(sc, "m", [-0.1, -0.4, 0.2], [0], [1], predicted=False)
    other = _case(sc, "n", [0.1, 0.2], [1], [0])
    summary = sc.summarise([one, two, other])
    assert list(summary) == ["m", "n"]
    m = summary["m"]
    assert m["n"] == 2
    assert m["against_negative"] == pytest.approx(2 / 3)  # w2 and w1 of 3 against words
    assert m["for_positive"] == pytest.approx(1 / 2)
    # bottom-k: one -> {w2, w3} (one negative), two -> {w1} (negative)
    assert m["bottom_negative"] == pytest.approx(2 / 3)
    assert m["words_negative"] == pytest.approx(3 / 7)
    assert m["against_in_bottom"] == pytest.approx(1.0)
    # ranks: one: w2 lowest (1), w3 2/3; two: w1 lowest (1)
    assert m["rank_against"] == pytest.approx((1 + 2 / 3 + 1) / 3)
    assert m["rank_for"] == pytest.approx((0 + 0.5) / 2)
    n = summary["n"]
    assert n["against_negative"] == 0.0 and n["for_positive"] == 1.0 and n["rank_against"] == 1.0


def test_a_column_with_nothing_to_count_is_none_and_shown_as_a_dash(sc):
    summary = sc.summarise([_case(sc, "only against", [0.2, -0.1], [], [1])])
    assert summary["only against"]["for_positive"] is None
    table = sc.markdown_table(summary)
    row = table.splitlines()[2].split("|")[1:-1]
    assert [cell.strip() for cell in row] == ["only against", "1", "100%", "–", "100%", "50%", "100%", "1.00", "–"]


def test_markdown_table_has_a_header_per_column_and_a_row_per_method(sc):
    summary = sc.summarise([_case(sc, "a", [0.4, -0.1, 0.2], [0], [1]), _case(sc, "b", [0.1, 0.3, 0.2], [0], [1])])
    lines = sc.markdown_table(summary).splitlines()
    assert lines[0] == "| method | n | " + " | ".join(h for _, h in sc.COLUMNS) + " |"
    assert lines[1].count("|") == len(sc.COLUMNS) + 3
    assert [line.split("|")[1].strip() for line in lines[2:]] == ["a", "b"]
    b = [cell.strip() for cell in lines[3].split("|")[1:-1]]
    assert b[2] == "0%" and b[3] == "100%"  # b's against word scores 0.3 > 0; its for word 0.1 > 0
    assert b[7] == "0.00" and b[8] == "1.00"  # b's against word ranks first, its for word last


def test_annotate_finds_each_word_once_and_refuses_missing_or_repeated_words(sc):
    words = ["great", "cast", "but", "a", "boring", ",", "predictable", "plot"]
    assert sc.annotate(words, "s", ["great"], ["boring", "predictable"]) == ([0], [4, 6])
    with pytest.raises(ValueError, match="'dull' is 0 times"):
        sc.annotate(words, "s", ["dull"], [])
    with pytest.raises(ValueError, match="'a' is 2 times"):
        sc.annotate(["a", "film", "a"], "s", ["a"], [])


def test_the_default_is_registered_as_the_committed_measurement_decides(sc):
    """docs/signed.md's rule: the default is signed if most words against the explained class score below 0."""
    from pathlib import Path

    from captum_prxai.methods import METHODS, default_method

    table = (Path(sc.__file__).parent / "results" / "signed_contrast.md").read_text(encoding="utf-8")
    lines = table.split("## All explanations", 1)[1].strip().splitlines()
    head = [cell.strip() for cell in lines[0].split("|")]
    row = next([cell.strip() for cell in line.split("|")] for line in lines if line.startswith("| PR-XAI default |"))
    against = float(row[head.index("against < 0")].rstrip("%")) / 100
    assert 0 <= against <= 1
    assert bool(METHODS[default_method()].signed) is (against > 0.5)
