"""Tests for captum_prxai.viz (HTML, records, graph, curves, terminal)."""

from __future__ import annotations

import html as html_lib
import re
from html.parser import HTMLParser

import pytest

from captum_prxai.exceptions import PRXAIError
from captum_prxai.viz.html import STYLE, comparison_page, token_heatmap_html
from captum_prxai.viz.tokens import merge_subwords, word_groups


class _Collector(HTMLParser):
    """Collects tags, prx-tok spans (attrs + text) and script elements."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.spans: list[dict] = []
        self._in_tok = 0
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if tag == "span" and "prx-tok" in (attrs.get("class") or "").split():
            self.spans.append({**attrs, "text": ""})
            self._in_tok = 1
        elif self._in_tok:
            self._in_tok += 1

    def handle_endtag(self, tag):
        if self._in_tok:
            self._in_tok -= 1

    def handle_data(self, data):
        if self._in_tok:
            self.spans[-1]["text"] += data


def _parse(fragment: str) -> _Collector:
    p = _Collector()
    p.feed(fragment)
    p.close()
    return p


def _bg(span: dict) -> tuple[int, int, int]:
    m = re.search(r"background-color:rgb\((\d+),(\d+),(\d+)\)", span["style"])
    assert m, span["style"]
    return tuple(int(v) for v in m.groups())


def _saturation(rgb: tuple[int, int, int]) -> float:
    """Distance from white: 0 for white, larger for a deeper colour."""
    return sum(255 - v for v in rgb)


HOSTILE = ["[CLS]", "<script>alert(1)</script>", "\"quoted\"", "it's", "<img src=x onerror=alert(2)>", "[SEP]"]


def test_heatmap_escapes_hostile_text():
    frag = token_heatmap_html(
        HOSTILE,
        [0.1, 0.4, 0.2, 0.1, 0.1, 0.1],
        method="<script>alert('m')</script>",
        predicted_label='"><script>alert(3)</script>',
        probability=0.5,
    )
    parsed = _parse(frag)
    assert "script" not in parsed.tags and "img" not in parsed.tags
    assert "<script" not in frag.lower() and "<img" not in frag.lower()
    # the hostile strings are still shown, as text
    texts = [s["text"] for s in parsed.spans]
    assert "<script>alert(1)</script>" in texts
    assert '"quoted"' in texts and "it's" in texts
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in frag
    assert "&quot;quoted&quot;" in frag


def test_one_span_per_token_with_scores_and_title():
    tokens = ["[CLS]", "a", "good", "film", "[SEP]"]
    scores = [0.05, 0.1, 0.5, 0.3, 0.05]
    frag = token_heatmap_html(tokens, scores, method="PR-AG", predicted_label="positive", probability=0.875)
    parsed = _parse(frag)
    assert frag.startswith('<div class="prx-heatmap"')
    assert [s["text"] for s in parsed.spans] == tokens
    assert [float(s["data-score"]) for s in parsed.spans] == scores
    assert "PR-AG" in frag and "positive" in frag and "0.875" in frag
    assert "prx-legend" in frag


def test_sequential_colours_follow_scores():
    tokens = [f"t{i}" for i in range(6)]
    scores = [0.3, 0.0, 0.05, 0.5, 0.1, 0.05]  # like a PageRank distribution
    spans = _parse(token_heatmap_html(tokens, scores, method="m")).spans
    sat = {float(s["data-score"]): _saturation(_bg(s)) for s in spans}
    ordered = sorted(sat)
    assert [sat[v] for v in ordered] == sorted(sat[v] for v in ordered)
    assert len({sat[v] for v in ordered}) == len(ordered)  # strictly increasing: distinct scores, distinct colours
    assert _bg(spans[1]) == (255, 255, 255)  # zero score is white
    # the top token gets the full colour even though scores are small
    tiny = [s * 1e-4 for s in scores]
    spans_tiny = _parse(token_heatmap_html(tokens, tiny, method="m")).spans
    assert [_bg(s) for s in spans_tiny] == [_bg(s) for s in spans]


def test_signed_scores_use_diverging_scale():
    tokens = ["neg", "zero", "pos", "bigpos", "bigneg"]
    scores = [-0.2, 0.0, 0.2, 0.8, -0.8]
    frag = token_heatmap_html(tokens, scores, method="grad")
    assert 'data-signed="true"' in frag
    spans = _parse(frag).spans
    colours = [_bg(s) for s in spans]
    r_neg, g_neg, _ = colours[0]
    r_pos, g_pos, _ = colours[2]
    assert r_neg > g_neg  # red for negative
    assert g_pos > r_pos  # green for positive
    assert colours[1] == (255, 255, 255)
    assert _saturation(colours[3]) > _saturation(colours[2])
    assert _saturation(colours[4]) > _saturation(colours[0])
    # forcing the sequential scale clips negatives to white
    seq = _parse(token_heatmap_html(tokens, scores, method="grad", signed=False)).spans
    assert _bg(seq[0]) == (255, 255, 255)


def test_merge_subwords_keeps_score_sums():
    tokens = ["[CLS]", "the", "play", "##ing", "##s", "un", "##real", "!", "[SEP]"]
    scores = [0.1, 0.05, 0.1, 0.2, 0.05, 0.15, 0.25, 0.03, 0.07]
    frag = token_heatmap_html(tokens, scores, method="m", merge_subwords=True)
    spans = _parse(frag).spans
    assert [s["text"] for s in spans] == ["[CLS]", "the", "playings", "unreal", "!", "[SEP]"]
    merged = [float(s["data-score"]) for s in spans]
    assert merged == pytest.approx([0.1, 0.05, 0.35, 0.4, 0.03, 0.07])
    assert sum(merged) == pytest.approx(sum(scores))
    assert [int(s["data-index"]) for s in spans] == [0, 1, 2, 5, 7, 8]
    # the merged "unreal" (0.4) is the top word: full colour
    top = max(spans, key=lambda s: float(s["data-score"]))
    assert top["text"] == "unreal"
    assert _saturation(_bg(top)) == max(_saturation(_bg(s)) for s in spans)


def test_merge_sentencepiece_and_bpe_markers():
    sp = ["<s>", "\u2581The", "\u2581play", "ing", "\u2581was", "\u2581fun", ".", "</s>"]
    words, scores, groups = merge_subwords(sp, [1, 2, 3, 4, 5, 6, 7, 8])
    assert words == ["<s>", "The", "playing", "was", "fun.", "</s>"]
    assert scores == [1, 2, 7, 5, 13, 8]
    bpe = ["<s>", "Hello", "\u0120wor", "ld", "\u0120!", "</s>"]
    words, scores, groups = merge_subwords(bpe, [0.1, 0.2, 0.3, 0.1, 0.2, 0.1])
    assert words == ["<s>", "Hello", "world", "!", "</s>"]
    assert scores == pytest.approx([0.1, 0.2, 0.4, 0.2, 0.1])
    assert word_groups(bpe) == [[0], [1], [2, 3], [4], [5]]


def test_tensor_and_numpy_scores_accepted():
    torch = pytest.importorskip("torch")
    import numpy as np

    tokens = ["a", "b", "c"]
    a = token_heatmap_html(tokens, torch.tensor([[0.2, 0.5, 0.3]]), method="m")
    b = token_heatmap_html(tokens, np.array([0.2, 0.5, 0.3]), method="m")
    c = token_heatmap_html(tokens, [0.2, 0.5, 0.3], method="m")
    assert [_bg(s) for s in _parse(a).spans] == [_bg(s) for s in _parse(c).spans]
    assert [_bg(s) for s in _parse(b).spans] == [_bg(s) for s in _parse(c).spans]


def test_bad_inputs_raise_prxai_error():
    with pytest.raises(PRXAIError, match="3 tokens but 2 scores"):
        token_heatmap_html(["a", "b", "c"], [0.1, 0.2], method="m")
    with pytest.raises(PRXAIError, match="non-finite"):
        token_heatmap_html(["a", "b"], [0.1, float("nan")], method="m")
    with pytest.raises(PRXAIError, match="at least one method"):
        comparison_page(["a"], {}, title="t")


def test_comparison_page_is_standalone_and_escaped():
    tokens = ["[CLS]", "<script>alert(1)</script>", "great", "##ly", "[SEP]"]
    page = comparison_page(
        tokens,
        {"PR-AG": [0.1, 0.2, 0.5, 0.1, 0.1], "Gradient <b>": [0.0, -0.3, 0.6, 0.1, 0.0]},
        title="Why <script>?",
        predicted_label="positive",
        probability=0.9,
        timings={"PR-AG": 0.0125},
        merge_subwords=True,
    )
    assert page.startswith("<!DOCTYPE html>")
    parsed = _parse(page)
    assert "script" not in parsed.tags and "link" not in parsed.tags
    assert "<script" not in page.lower()
    assert "http://" not in page and "https://" not in page and "src=" not in page
    assert page.count('class="prx-heatmap"') == 2
    assert "12.5 ms" in page
    assert STYLE.strip()[:40] in page
    assert "Gradient &lt;b&gt;" in page
    assert "greatly" in [s["text"] for s in parsed.spans]


def test_long_text_wraps():
    assert "overflow-wrap" in STYLE and "white-space: normal" in STYLE
    tokens = ["word"] * 600 + ["x" * 300]
    frag = token_heatmap_html(tokens, [1.0 / 601] * 601, method="m")
    assert frag.count('class="prx-tok"') == 601
    # tokens are separated by spaces so the browser can break lines between them
    assert '</span> <span class="prx-tok"' in frag
