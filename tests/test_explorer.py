"""API tests of the explorer (captum_prxai.explorer) with Flask's test client, on a tiny BERT built from a config."""

from __future__ import annotations

import re
import time

import pytest

from conftest import poll_job  # noqa: E402

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("flask")

import captum_prxai  # noqa: E402
from captum_prxai.methods import METHODS, available_methods, build_method, make_forward_func  # noqa: E402
from captum_prxai.explorer import create_app  # noqa: E402
from captum_prxai.explorer.server import make_server  # noqa: E402
from captum_prxai.exceptions import PRXAIError  # noqa: E402
from e2e._tiny import MAX_TOKENS, TEXTS, build_tiny  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny(tmp_path_factory.mktemp("explorer-tiny"))


@pytest.fixture(scope="module", autouse=True)
def two_walk_methods():
    """PR-TAG± (both walks) and PR-TAG± with λ=0.25 and hubs 0.5, registered for these tests only."""
    from captum_prxai.methods import register_pr_method

    register_pr_method("explorer-test-pm", {"walks": "both", "negative_weight": 1.0}, "PR-TAG± (test)",
                       class_name="PRTemperedAttentionGradient")
    register_pr_method("explorer-test-pm-hubs", {"walks": "both", "negative_weight": 0.25, "hub_power": 0.5},
                       "PR-TAG± hubs (test)", class_name="PRTemperedAttentionGradient")
    yield
    METHODS.pop("explorer-test-pm", None)
    METHODS.pop("explorer-test-pm-hubs", None)


@pytest.fixture
def app(tiny):
    model, tokenizer, datasets = tiny
    return create_app(model, tokenizer, datasets, model_name="tiny", max_chars=120)


@pytest.fixture
def client(app):
    return app.test_client()


def wait(client, job, timeout=60.0):
    """Poll a job until it is done or cancelled."""
    return poll_job(client, job, "/api/jobs", timeout)


def explain(client, **body):
    resp = client.post("/api/explain", json=body)
    assert resp.status_code in (200, 202), resp.json
    return wait(client, resp.json)


def draw_graph(client, **body):
    """Post a graph request, wait for its job, and return the drawing."""
    resp = client.post("/api/graph", json=body)
    assert resp.status_code in (200, 202), resp.json
    job = wait(client, resp.json)
    assert job["kind"] == "graph" and job["status"] == "done" and job["errors"] == [], job
    return job["graph"]


def predictions(tiny, texts):
    model, tokenizer, _ = tiny
    enc = tokenizer(list(texts), padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**enc).logits.argmax(-1).tolist()


# ----------------------------------------------------------------------------- pages and safety
def test_info_lists_the_bench_registry_and_limits(client):
    info = client.get("/api/info").json
    assert [m["name"] for m in info["methods"]] == available_methods()
    by_name = {m["name"]: m for m in info["methods"]}
    assert by_name["pr-ag"]["params"] == ["damping", "teleport", "graph", "head_reduction", "hub_power"]
    # the gate on the walks is a parameter of the methods that walk both signs only
    assert by_name["explorer-test-pm"]["params"] == ["damping", "teleport", "graph", "head_reduction", "hub_power",
                                              "walk_gate"]
    assert by_name["ig"]["params"] == ["ig_steps", "ig_baseline"] and by_name["occlusion"]["params"] == ["window"]
    assert by_name["shapley"]["params"] == ["permutations"] and by_name["lime"]["params"] == ["samples"]
    assert by_name["shapley"]["lane"] == "slow" and by_name["pr-ag"]["lane"] == "fast"
    assert by_name["ig"]["label"] == METHODS["ig"].label
    assert info["label_names"] == ["negative", "positive"]
    assert info["datasets"] == ["tiny-reviews", "tiny-topics"] and info["dataset"] == "tiny-reviews"
    assert info["limits"]["max_tokens"] == MAX_TOKENS and info["limits"]["max_chars"] == 120
    # the default PR method is the registry's preset with PageRankAttribution's own default edges
    model = client.application.extensions["prxai_explorer"].model
    forward = make_forward_func(model)
    library = captum_prxai.PageRankAttribution(forward, captum_prxai.attention_layers(model)).spec.edge_weight
    first = info["default_methods"][0]
    assert build_method(first, model, forward).attribution.spec.edge_weight == library
    assert info["default_methods"] == [first, "ig"] and METHODS[first].family == "pr-xai"


def test_page_and_static_files(client):
    from pathlib import Path

    page = client.get("/")
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert b'src="/static/app.js"' in page.data
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    js = client.get("/static/app.js")
    static = Path(captum_prxai.__file__).parent / "explorer" / "static"
    assert js.status_code == 200 and js.data == (static / "app.js").read_bytes()
    assert js.mimetype == "text/javascript"
    css = client.get("/prx-style.css")
    assert css.status_code == 200 and b".prx-tok" in css.data


@pytest.mark.parametrize("path", [
    "/static/../app.py", "/static/..%2fapp.py", "/static/%2e%2e/engine.py", "/static/../../exceptions.py",
    "/static//etc/passwd", "/static/%2Fetc%2Fpasswd", "/static/static/app.js", "/static/index.html/..",
    "/static/app.js/../../app.py", "/../captum_prxai/explorer/app.py", "/static/APP.JS", "/static/",
])
def test_no_path_outside_the_fixed_static_files(client, path):
    resp = client.get(path, follow_redirects=True)  # Werkzeug redirects '//' to '/'; the target is refused too
    assert resp.status_code == 404, (path, resp.status_code)
    assert b"def create_app" not in resp.data and b"root:" not in resp.data
    assert resp.is_json and "not found" in resp.json["error"]


def test_unknown_host_is_refused(client):
    """DNS rebinding guard: a page on another host name cannot drive the local server."""
    assert client.get("/api/info", headers={"Host": "evil.example:8765"}).status_code == 403
    assert client.get("/api/info", headers={"Host": "127.0.0.1:8765"}).status_code == 200


def test_any_host_when_allowed_hosts_is_none(tiny):
    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets, allowed_hosts=None)
    assert app.test_client().get("/api/info", headers={"Host": "lab-server:9000"}).status_code == 200


def test_post_needs_a_json_object(client):
    resp = client.post("/api/explain", data="text=a good film", content_type="application/x-www-form-urlencoded")
    assert resp.status_code == 400 and "JSON object" in resp.json["error"]
    resp = client.post("/api/explain", json=["a good film"])
    assert resp.status_code == 400


def test_explain_is_post_only(client):
    resp = client.get("/api/explain")
    assert resp.status_code == 405 and "not allowed" in resp.json["error"]


# ----------------------------------------------------------------------------- oversized input
def test_text_over_the_character_limit_is_refused(client):
    text = "good " * 30  # 150 characters > max_chars=120
    resp = client.post("/api/explain", json={"text": text, "methods": ["pr-ag"]})
    assert resp.status_code == 413
    assert resp.json["error"] == (
        "the text has 150 characters but the explorer accepts at most 120; shorten it, tick 'truncate' to explain "
        "its first characters, or restart with a larger --max-chars."
    )
    # with 'truncate' the typed text is cut to the limit, as a dataset example is cut to the model's tokens
    job = explain(client, text=text, methods=["pr-a"], truncate=True)
    assert job["input"]["truncated"] is True and job["input"]["full_chars"] == 150
    assert job["input"]["text"] == text[:120] and job["input"]["chars"] == 120


def test_text_over_the_model_limit_is_refused_unless_truncated(client):
    text = " ".join(["good film"] * 12)  # 24 words + [CLS] [SEP] = 26 tokens > 24
    assert len(text) <= 120
    resp = client.post("/api/explain", json={"text": text, "methods": ["pr-a"]})
    assert resp.status_code == 413
    assert "26 tokens" in resp.json["error"] and f"at most {MAX_TOKENS}" in resp.json["error"]
    assert "truncate" in resp.json["error"]
    job = explain(client, text=text, methods=["pr-a"], truncate=True)
    assert job["input"]["truncated"] is True and job["input"]["full_length"] == 26
    assert job["input"]["n_tokens"] == MAX_TOKENS and len(job["results"][0]["scores"]) == MAX_TOKENS


def test_request_body_limit(client):
    resp = client.post("/api/explain", json={"text": "a" * 300_000, "methods": ["pr-a"]})
    assert resp.status_code == 413 and "KB" in resp.json["error"]


@pytest.mark.parametrize("body, message", [
    ({"text": "   ", "methods": ["pr-ag"]}, "the text is empty"),
    ({"text": "a good film", "methods": []}, "pick at least one method"),
    ({"text": "a good film", "methods": ["pr-xyz"]}, "unknown method 'pr-xyz'"),
    ({"text": "a good film", "methods": ["pr-ag"], "params": {"damping": 1.5}}, "between 0 and 0.99"),
    ({"text": "a good film", "methods": ["ig"], "params": {"ig_steps": "many"}}, "must be an integer"),
    ({"text": "a good film", "methods": ["pr-ag"], "params": {"alpha": 1}}, "unknown parameter(s) alpha"),
    ({"text": "a good film", "methods": ["pr-ag"], "target": 5}, "target 5 is out of range"),
    ({"example": {"dataset": "tiny-reviews", "index": 99}, "methods": ["pr-ag"]}, "example 99 is out of range"),
    ({"example": {"dataset": "nope", "index": 0}, "methods": ["pr-ag"]}, "unknown dataset 'nope'"),
])
def test_bad_requests_get_a_clear_json_error(client, body, message):
    resp = client.post("/api/explain", json=body)
    assert resp.status_code == 400, resp.json
    assert message in resp.json["error"]


# ----------------------------------------------------------------------------- examples and filters
def test_predictions_are_lazy(tiny):
    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets)
    client = app.test_client()
    client.get("/api/info")
    assert client.get("/api/stats").json["predictions_cached"] == 0
    page = client.get("/api/examples?limit=3").json
    assert [item["index"] for item in page["items"]] == [0, 1, 2]
    assert page["next_start"] == 3 and page["exhausted"] is False
    assert client.get("/api/stats").json["predictions_cached"] == 3  # only what is shown
    calls = client.get("/api/stats").json["prediction_calls"]
    again = client.get("/api/examples?limit=3").json
    assert again["computed"] == 0 and client.get("/api/stats").json["prediction_calls"] == calls


def test_filters_match_the_model(client, tiny):
    texts = [t for t, _ in TEXTS]
    labels = [lab for _, lab in TEXTS]
    preds = predictions(tiny, texts)
    assert 0 < sum(preds) < len(preds), "the tiny model should predict both classes"
    assert any(p != lab for p, lab in zip(preds, labels)), "the tiny model should make mistakes"

    def indices(query):
        page = client.get(f"/api/examples?dataset=tiny-reviews&limit=100&{query}").json
        assert page["exhausted"] is True
        return [item["index"] for item in page["items"]]

    n = len(texts)
    assert indices("") == list(range(n))
    assert indices("label=1") == [i for i in range(n) if labels[i] == 1]
    assert indices("predicted=0") == [i for i in range(n) if preds[i] == 0]
    assert indices("correct=correct") == [i for i in range(n) if preds[i] == labels[i]]
    assert indices("correct=wrong") == [i for i in range(n) if preds[i] != labels[i]]
    assert indices("label=0&correct=wrong") == [i for i in range(n) if labels[i] == 0 and preds[i] != 0]
    assert indices("q=FILM") == [i for i in range(n) if "film" in texts[i]]
    assert indices("q=was+the") == [i for i in range(n) if "was" in texts[i] and "the" in texts[i]]
    assert indices("q=film&predicted=1") == [i for i in range(n) if "film" in texts[i] and preds[i] == 1]
    page = client.get("/api/examples?dataset=tiny-reviews&limit=100").json
    for item in page["items"]:
        assert item["predicted"] == preds[item["index"]]
        assert item["correct"] == (preds[item["index"]] == labels[item["index"]])
        assert item["label_name"] == ["negative", "positive"][labels[item["index"]]]


def test_pages_cover_every_match_once(client, tiny):
    preds = predictions(tiny, [t for t, _ in TEXTS])
    seen, start = [], 0
    while start is not None:
        page = client.get(f"/api/examples?dataset=tiny-reviews&predicted=1&limit=2&start={start}").json
        assert len(page["items"]) <= 2
        seen += [item["index"] for item in page["items"]]
        start = page["next_start"]
    assert seen == [i for i, p in enumerate(preds) if p == 1]


def test_prediction_budget_gives_a_resumable_short_page(tiny):
    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets)
    engine = app.extensions["prxai_explorer"]
    engine.batch_size = 2
    page = engine.list_examples("tiny-reviews", correct=False, limit=100, budget=4)
    assert page["exhausted"] is False and page["next_start"] is not None
    assert page["scanned"] == page["next_start"] < page["size"]  # the page shows this as progress
    assert page["computed"] <= 4 + len(page["items"])
    rest = engine.list_examples("tiny-reviews", correct=False, limit=100, start=page["next_start"], budget=1000)
    assert rest["exhausted"] is True
    both = [i["index"] for i in page["items"] + rest["items"]]
    assert both == [i["index"] for i in engine.list_examples("tiny-reviews", correct=False, limit=100)["items"]]


def test_correctness_needs_matching_classes(client):
    page = client.get("/api/examples?dataset=tiny-topics").json
    assert [item["correct"] for item in page["items"]] == [None, None, None]
    resp = client.get("/api/examples?dataset=tiny-topics&correct=wrong")
    assert resp.status_code == 400 and "are not the classes of tiny-topics" in resp.json["error"]
    resp = client.get("/api/examples?dataset=tiny-reviews&label=7")
    assert resp.status_code == 400 and "out of range" in resp.json["error"]
    summary = client.get("/api/datasets/tiny-topics").json
    assert summary == {"name": "tiny-topics", "size": 3, "label_names": ["film", "plot", "story"],
                       "label_counts": [1, 1, 1], "comparable": False}


# ----------------------------------------------------------------------------- explain, cache, jobs
def test_explain_matches_the_library(client, tiny):
    model, tokenizer, _ = tiny
    job = explain(client, text="the plot was dull", methods=["pr-ag", "rollout"], params={"damping": 0.7})
    info = job["input"]
    enc = tokenizer("the plot was dull", return_tensors="pt")
    assert info["tokens"] == tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    with torch.no_grad():
        probs = model(**enc).logits.softmax(-1)[0]
    assert info["probabilities"] == pytest.approx(probs.tolist(), abs=1e-6)
    assert info["predicted"] == int(probs.argmax()) == info["target"]
    assert info["explained_position"] == 0  # an encoder explains [CLS]
    assert all(r["html"].count("prx-explained") == 1 for r in job["results"])

    def forward(ids, mask):
        return model(input_ids=ids, attention_mask=mask).logits

    expected = captum_prxai.PRAttentionGradient(forward, captum_prxai.attention_layers(model), damping=0.7).attribute(
        enc["input_ids"], target=info["target"], additional_forward_args=(enc["attention_mask"],))[0]
    result = {r["method"]: r for r in job["results"]}
    assert result["pr-ag"]["scores"] == pytest.approx(expected.tolist(), abs=1e-6)
    assert result["pr-ag"]["params"] == {"damping": 0.7, "teleport": "target", "graph": "token",
                                         "head_reduction": "mean"}
    assert result["rollout"]["params"] == {"head_reduction": "mean"}
    html = result["pr-ag"]["html"]
    assert html.count("data-score=") == len(info["tokens"]) and 'data-method="PR-AG"' in html
    assert job["total"] == 2 and job["done"] == 2 and job["errors"] == []


def test_explain_a_dataset_example_and_another_target(client):
    job = explain(client, example={"dataset": "tiny-reviews", "index": 4}, methods=["pr-a"], target=1)
    assert job["input"]["text"] == TEXTS[4][0]
    assert job["input"]["source"] == {"kind": "example", "dataset": "tiny-reviews", "index": 4,
                                      "label": TEXTS[4][1], "label_name": "negative"}
    assert job["input"]["target"] == 1 and job["input"]["target_name"] == "positive"


def test_results_are_cached_per_example_method_and_parameters(tiny):
    model, tokenizer, datasets = tiny
    client = create_app(model, tokenizer, datasets).test_client()
    body = {"text": "great acting and fun story", "methods": ["pr-ag", "ig"], "params": {"ig_steps": 150}}
    first = client.post("/api/explain", json=body)
    assert first.status_code == 202  # computed in the background
    first_job = wait(client, first.json)
    assert [r["cached"] for r in first_job["results"]] == [False, False]
    stats = client.get("/api/stats").json
    assert stats["attributions_cached"] == 2 and stats["attribution_hits"] == 0

    start = time.perf_counter()
    second = client.post("/api/explain", json=body)
    second_seconds = time.perf_counter() - start
    assert second.status_code == 200 and second.json["status"] == "done"  # no job to wait for
    assert [r["cached"] for r in second.json["results"]] == [True, True]
    assert [r["scores"] for r in second.json["results"]] == [r["scores"] for r in first_job["results"]]
    assert client.get("/api/stats").json["attribution_hits"] == 2
    assert second_seconds < sum(r["seconds"] for r in first_job["results"])

    # IG steps are part of IG's key only: PR-AG stays cached, IG is recomputed
    third = wait(client, client.post("/api/explain", json=dict(body, params={"ig_steps": 8})).json)
    assert {r["method"]: r["cached"] for r in third["results"]} == {"pr-ag": True, "ig": False}
    # damping is part of PR-AG's key, and changes the scores
    fourth = wait(client, client.post("/api/explain", json=dict(body, methods=["pr-ag"],
                                                                params={"damping": 0.3})).json)
    assert fourth["results"][0]["cached"] is False
    assert fourth["results"][0]["scores"] != first_job["results"][0]["scores"]
    # the same example picked from the dataset shares the cache with the typed text
    job = explain(client, example={"dataset": "tiny-reviews", "index": 3}, methods=["pr-ag"])
    assert job["results"][0]["cached"] is True


def test_progress_of_a_running_job(tiny):
    """A job reports per-method progress while methods run one by one."""
    model, tokenizer, datasets = tiny
    client = create_app(model, tokenizer, datasets).test_client()
    resp = client.post("/api/explain", json={"text": "a good film and a great story", "methods":
                                             ["kernel-shap", "lime", "pr-a"], "params": {"samples": 300}})
    assert resp.status_code == 202
    job = resp.json
    assert job["total"] == 3 and job["done"] == 0 and job["status"] in ("queued", "running")
    seen = set()
    while job["status"] != "done":
        seen.add((job["done"], job["current"]))
        time.sleep(0.02)
        job = client.get(f"/api/jobs/{job['id']}").json
    assert job["done"] == 3 and [r["method"] for r in job["results"]] == ["kernel-shap", "lime", "pr-a"]
    assert any(current is not None for _, current in seen)
    assert client.get("/api/jobs/" + "0" * 32).status_code == 404
    assert client.get("/api/jobs/../../etc").status_code == 404


def test_a_failing_method_is_reported_and_the_rest_still_run(tiny):
    from captum_prxai.bench.methods import Explainer, register_method

    def factory(model, forward, ctx):
        def boom(ids, mask, special, target):
            raise RuntimeError("deliberate failure")

        return Explainer("explorer-test-fail", "Failing", boom)

    register_method("explorer-test-fail", "Failing", "control", "always fails", factory)
    try:
        model, tokenizer, datasets = tiny
        client = create_app(model, tokenizer, datasets).test_client()
        job = explain(client, text="a good film", methods=["explorer-test-fail", "pr-a"])
        assert job["errors"] == [{"method": "explorer-test-fail", "error": "RuntimeError: deliberate failure"}]
        assert [r["method"] for r in job["results"]] == ["pr-a"]
    finally:
        METHODS.pop("explorer-test-fail", None)


# ----------------------------------------------------------------------------- graph and export
@pytest.mark.parametrize("method, params, options", [
    ("pr-ag", {}, {}),
    ("pr-g", {"damping": 0.5, "head_reduction": "max"}, {"damping": 0.5, "head_reduction": "max"}),
    ("pr-a", {"teleport": "uniform"}, {"teleport": "uniform"}),
])
def test_graph_view_draws_the_scored_graph(client, tiny, method, params, options):
    """The drawn edges are the top edges of the adjacency PageRank ran on, and its PageRank gives the scores."""
    from captum_prxai.graph.pagerank import pagerank
    from captum_prxai.viz.graph import top_edges_of

    model, tokenizer, _ = tiny
    text = "the story was not good"
    out = draw_graph(client, text=text, method=method, params=params, top_edges=5, nodes=5)
    assert out["svg"].startswith("<svg") and "</svg>" in out["svg"] and out["graph"] == "token"
    enc = tokenizer(text, return_tensors="pt")
    job = explain(client, text=text, methods=[method], params=params)
    assert out["scores"] == pytest.approx(job["results"][0]["scores"], abs=1e-6)  # the heatmap's scores

    # the same graph from the library, with the same options
    forward = make_forward_func(model)
    from captum_prxai.methods import MethodContext

    attribution = build_method(method, model, forward, MethodContext(options={method: options})).attribution
    graph = attribution.attribute_graph(enc["input_ids"], target=job["input"]["target"],
                                        additional_forward_args=(enc["attention_mask"],))
    adjacency = graph.adjacency[0]
    scores = graph.scores[0]
    ranks = pagerank(graph.adjacency, graph.damping, personalization=graph.teleport, node_mask=graph.node_mask,
                     tol=1e-10, max_iter=2000)[0]
    assert (ranks / ranks.sum()).tolist() == pytest.approx(out["scores"], abs=1e-5)
    top5 = sorted(range(len(scores)), key=lambda i: -float(scores[i]))[:5]
    assert out["nodes"] == sorted(top5)
    sub = adjacency[out["nodes"]][:, out["nodes"]]
    expected = [[out["nodes"][i], out["nodes"][j], w] for i, j, w in top_edges_of(sub, 5)]
    assert [e[:2] for e in out["edges"]] == [e[:2] for e in expected]
    assert [e[2] for e in out["edges"]] == pytest.approx([e[2] for e in expected], rel=1e-6)
    assert "token graph (2 layers summed)" in out["title"] and "top 5 of" in out["title"]


def test_graph_view_of_the_layered_graph(client):
    out = draw_graph(client, text="a good film", method="pr-ag", params={"graph": "layered"}, nodes=200)
    assert out["graph"] == "layered"
    assert "layered graph (3 x 5 nodes)" in out["title"]  # (L + 1) x T nodes, 2 layers, 5 tokens
    assert max(out["nodes"]) >= 5 and len(out["nodes"]) == 15


@pytest.mark.parametrize("gate, weight", [(-1.0, 0.0), (1.0, 1.0)])
def test_graph_view_says_when_the_gate_kept_the_positive_walk_alone(client, gate, weight):
    out = draw_graph(client, text="the story was not good", method="explorer-test-pm", params={"walk_gate": gate})
    assert out["walk_weight"] == weight
    assert ("the two walks agree (correlation above" in out["title"]) is (weight == 0.0)
    unsigned = draw_graph(client, **{"text": "the story was not good", "method": "explorer-test-pm"})
    assert unsigned["walk_weight"] == 1.0  # no gate: λ of PR-TAG±


def test_graph_view_says_when_the_token_scores_carry_the_relevance_weight(client):
    """The encoder default weighs each token's score by 1 + R/max|R| on top of the drawn walk: the title says so;
    a method without the weight does not."""
    from captum_prxai.methods import default_method

    name = default_method(client.application.extensions["prxai_explorer"].model)
    out = draw_graph(client, **{"text": "the story was not good", "method": name})
    assert out["method"] == name and "token scores times 1 + R/max|R| (R: gradient x input)" in out["title"]
    plain = draw_graph(client, **{"text": "the story was not good", "method": "explorer-test-pm"})
    assert "R/max|R|" not in plain["title"]


def test_graph_view_of_both_walks_draws_each_walk_and_says_which(client, tiny):
    """PR-TAG± has two graphs: each is drawn on request, sized by its own PageRank, and the difference is the score."""
    from captum_prxai.graph.pagerank import pagerank
    from captum_prxai.methods import MethodContext
    from captum_prxai.viz.graph import top_edges_of

    model, tokenizer, _ = tiny
    text = "the story was not good"
    drawn = {}
    for walk in ("positive", "negative"):
        out = draw_graph(client, text=text, method="explorer-test-pm", top_edges=4, nodes=200, walk=walk)
        assert out["walk"] == walk and out["walks"] == ["positive", "negative"]
        assert f"{walk} walk (the scores are the positive walk's PageRank minus the negative walk's" in out["title"]
        drawn[walk] = out
    assert drawn["positive"]["scores"] == drawn["negative"]["scores"]
    enc = tokenizer(text, return_tensors="pt")
    attribution = build_method("explorer-test-pm", model, make_forward_func(model), MethodContext()).attribution
    target = explain(client, text=text, methods=["explorer-test-pm"])["input"]["target"]
    graph = attribution.attribute_graph(enc["input_ids"], target=target,
                                        additional_forward_args=(enc["attention_mask"],))
    walks = {"positive": graph.adjacency, "negative": graph.negative_adjacency}
    ranks = {w: pagerank(a.double(), graph.damping, personalization=graph.teleport.double(),
                         node_mask=graph.node_mask, tol=1e-10, max_iter=2000)[0] for w, a in walks.items()}
    difference = ranks["positive"] / ranks["positive"].sum() - ranks["negative"] / ranks["negative"].sum()
    assert difference.tolist() == pytest.approx(drawn["positive"]["scores"], abs=1e-5)
    for walk, adjacency in walks.items():
        nodes = drawn[walk]["nodes"]
        sub = adjacency[0][nodes][:, nodes]
        assert [e[:2] for e in drawn[walk]["edges"]] == [[nodes[i], nodes[j]] for i, j, _ in top_edges_of(sub, 4)]
    assert drawn["positive"]["edges"] != drawn["negative"]["edges"]
    one = draw_graph(client, **{"text": text, "method": "pr-ag"})
    assert one["walks"] == ["positive"] and "walk" not in one["title"]
    resp = client.post("/api/graph", json={"text": text, "method": "pr-ag", "walk": "negative"})
    assert resp.status_code == 400 and "has no negative walk to draw" in resp.json["error"]
    resp = client.post("/api/graph", json={"text": text, "method": "explorer-test-pm", "walk": "both"})
    assert resp.status_code == 400 and "'walk' must be one of positive, negative; got 'both'" in resp.json["error"]


def test_graph_view_of_the_hub_weighted_walks_sizes_nodes_by_what_was_scored(client, tiny):
    """With ``hub_power`` each walk's node sizes are its PageRank times the graph's hubs, as the scores weigh them,
    and the title says so; the parameter reaches the scores."""
    from captum_prxai.methods import MethodContext

    model, tokenizer, _ = tiny
    text = "the story was not good"
    out = draw_graph(client, text=text, method="explorer-test-pm-hubs", nodes=3, walk="negative")
    assert "negative walk (the scores are the positive walk's PageRank x its graph's global PageRank^0.5 (hubs)" \
        in out["title"]
    attribution = build_method("explorer-test-pm-hubs", model, make_forward_func(model), MethodContext()).attribution
    enc = tokenizer(text, return_tensors="pt")
    graph = attribution.attribute_graph(enc["input_ids"], target=explain(client, text=text, methods=["pr-ag"])[
        "input"]["target"], additional_forward_args=(enc["attention_mask"],))
    sizes = graph.walk_scores("negative")[0]
    assert out["nodes"] == sorted(sorted(range(len(sizes)), key=lambda i: -float(sizes[i]))[:3])
    assert out["scores"] == pytest.approx(graph.scores[0].tolist(), abs=1e-6)
    raised = draw_graph(client, **{"text": text, "method": "pr-ag", "params": {"hub_power": 1.0}})
    assert raised["params"]["hub_power"] == 1.0
    attribution = build_method("pr-ag", model, make_forward_func(model), MethodContext()).attribution
    attribution.hub_power = 1.0
    expected = attribution.attribute_graph(enc["input_ids"], target=graph.target,
                                           additional_forward_args=(enc["attention_mask"],)).scores[0]
    assert raised["scores"] == pytest.approx(expected.tolist(), abs=1e-7)  # hubs move them ~1e-5 on this tiny model
    resp = client.post("/api/graph", json={"text": text, "method": "pr-ag", "params": {"hub_power": 3}})
    assert resp.status_code == 400 and "parameter 'hub_power' must be between 0 and 2; got 3" in resp.json["error"]


def test_graph_view_refuses_other_methods_and_settings(client):
    resp = client.post("/api/graph", json={"text": "a good film", "method": "ig"})
    assert resp.status_code == 400 and "needs a PR-XAI method" in resp.json["error"]
    resp = client.post("/api/graph", json={"text": "a good film", "method": "pr-a", "layout": "spiral"})
    assert resp.status_code == 400 and "layout" in resp.json["error"]
    resp = client.post("/api/graph", json={"text": "a good film", "method": "pr-a", "nodes": 1})
    assert resp.status_code == 400 and "nodes must be between 2 and 200" in resp.json["error"]


def test_export_is_a_standalone_download(client):
    hostile = "a good <script>alert(1)</script> film"
    resp = client.post("/api/export", json={"text": hostile, "methods": ["pr-ag", "raw-attention"],
                                            "graph": "pr-a"})
    assert resp.status_code == 200, resp.data[:300]
    assert resp.headers["Content-Disposition"] == 'attachment; filename="prxai-a-good-script-alert-1-script-film.html"'
    page = resp.get_data(as_text=True)
    assert page.startswith("<!DOCTYPE html>")
    assert page.count('class="prx-heatmap"') == 2 and "<svg" in page and "PR-A graph" in page
    assert "<script" not in page.lower() and "&lt;script&gt;" in page
    assert "model: tiny" in page


# ----------------------------------------------------------------------------- server and command
def test_taken_port_is_a_clear_error(app):
    first = make_server(app, "127.0.0.1", 0)
    try:
        with pytest.raises(PRXAIError, match=f"port {first.server_port} on 127.0.0.1 is already in use"):
            make_server(app, "127.0.0.1", first.server_port)
    finally:
        first.server_close()


def test_command_line_checks(capsys):
    from captum_prxai.cli import main

    assert main(["explore", "--port", "70000", "--no-browser"]) == 2
    assert "--port must be between 0 and 65535" in capsys.readouterr().err
    assert main(["explore", "--methods", "nope", "--no-browser"]) == 2
    assert "unknown method 'nope'" in capsys.readouterr().err
    assert main(["explore", "--dataset", "nope", "--no-browser"]) == 2
    assert "unknown dataset 'nope'" in capsys.readouterr().err
    assert main(["explore", "--memory-budget-mb", "0", "--no-browser"]) == 2
    assert "--memory-budget-mb must be a positive number, got 0.0" in capsys.readouterr().err
    assert main(["explore", "--max-method-seconds", "inf", "--no-browser"]) == 2
    assert "--max-method-seconds must be a positive number" in capsys.readouterr().err
    assert main(["explore", "--model", "a", "--model", "a", "--no-browser"]) == 2
    assert "--model names a model twice: a, a" in capsys.readouterr().err


def test_command_serves_the_loaded_model_on_loopback(tiny, monkeypatch, capsys):
    """`captum-prxai explore` wiring: model loaded by name, app built, server on 127.0.0.1, browser opened."""
    import webbrowser

    import captum_prxai.explorer as explorer
    import captum_prxai.models as models
    from captum_prxai.cli import main

    model, tokenizer, _ = tiny
    loaded, served, opened = [], [], []

    class FakeServer:
        server_port = 8799

        def serve_forever(self):
            raise KeyboardInterrupt

        def server_close(self):
            served.append("closed")

    def fake_make_server(app, host, port):
        served.append((app, host, port))
        return FakeServer()

    monkeypatch.setattr(models, "load_model", lambda name: loaded.append(name) or (model, tokenizer))
    monkeypatch.setattr(explorer, "make_server", fake_make_server)
    monkeypatch.setattr(webbrowser, "open", opened.append)
    assert main(["explore", "--model", "my-model", "--dataset", "tweets", "--port", "8799",
                 "--methods", "pr-a,rollout"]) == 0
    out = capsys.readouterr().out
    assert loaded == ["my-model"]
    app, host, port = served[0]
    assert (host, port) == ("127.0.0.1", 8799) and served[-1] == "closed"
    assert "PR-XAI explorer: http://127.0.0.1:8799/" in out and "warning" not in out
    assert opened == ["http://127.0.0.1:8799/"]
    client = app.test_client()
    info = client.get("/api/info").json
    assert info["model"] == "my-model" and info["dataset"] == "tweets"
    assert info["default_methods"] == ["pr-a", "rollout"]
    assert client.get("/api/info", headers={"Host": "evil.example"}).status_code == 403

    served.clear()
    assert main(["explore", "--model", "tuned", "--model", "base", "--port", "8799", "--no-browser",
                 "--memory-budget-mb", "64"]) == 0
    assert loaded[-2:] == ["tuned", "base"]
    info = served[0][0].test_client().get("/api/info").json
    assert [m["name"] for m in info["models"]] == ["tuned", "base"] and info["limits"]["memory_budget_mb"] == 64
    first = info["default_methods"][0]
    assert info["default_methods"] == [first, "ig"] and METHODS[first].family == "pr-xai"
    served.clear()
    capsys.readouterr()
    assert main(["explore", "--host", "0.0.0.0", "--port", "8799", "--no-browser"]) == 0
    assert "warning: listening on 0.0.0.0" in capsys.readouterr().out
    assert served[0][0].test_client().get("/api/info", headers={"Host": "lab:8799"}).status_code == 200
    assert len(opened) == 1  # --no-browser


# ----------------------------------------------------------------------------- malformed requests
MALFORMED = [
    ('{"text": "a good film", "methods": ["ig"], "params": {"ig_steps": Infinity}}', "contains Infinity"),
    ('{"text": "a good film", "methods": ["occlusion"], "params": {"window": -Infinity}}', "contains -Infinity"),
    ('{"text": "a good film", "methods": ["lime"], "params": {"samples": NaN}}', "contains NaN"),
    ('{"text": "a \\ud800 film", "methods": ["pr-a"]}', "unpaired surrogate (\\ud800) in 'text'"),
    ('{"text": "a film", "methods": ["pr-a"], "params": {"x\\udfff": 1}}', "unpaired surrogate (\\udfff)"),
    ('{"text": "a film", "methods": ["pr-a"], "params": ' + "[" * 30000 + "]" * 30000 + "}", "nested more than"),
    ('{"text": "a film", "methods": ["pr-a"], "params": ' + '{"a": ' * 30000 + "1" + "}" * 30000 + "}",
     "nested more than"),
    ('{"text": "a film", "methods": ["pr-a"]', "not valid JSON"),
    ('["a film"]', "send a JSON object"),
    ('{"text": "a good film", "methods": ["ig"], "params": {"ig_steps": true}}', "not a string or a boolean"),
    ('{"text": "a good film", "methods": ["ig"], "params": {"ig_steps": "2.7"}}', "not a string or a boolean"),
    ('{"text": "a good film", "methods": ["ig"], "params": {"ig_steps": 2.7}}', "must be an integer; got 2.7"),
    ('{"text": "a good film", "methods": ["ig"], "params": {"ig_steps": 1e400}}', "must be a finite number"),
    ('{"text": "a good film", "methods": ["pr-a"], "truncate": "false"}', "'truncate' must be true or false"),
    ('{"text": "a good film", "methods": ["pr-a"], "merge_subwords": 1}', "'merge_subwords' must be true or false"),
    ('{"text": "a good film", "methods": ["pr-a"], "target": 0.5}', "'target' must be a class index"),
    ('{"text": "a good film", "methods": [["pr-a"]]}', "a method name must be a string"),
]
#: what the graph view does not read (it takes one 'method' and no display flags)
_NOT_GRAPH = ("merge_subwords", "a method name")


@pytest.mark.parametrize("raw, message, path", [
    (raw, message, path) for raw, message in MALFORMED
    for path in ("/api/explain", "/api/graph", "/api/export", "/api/estimate")
    if not (path == "/api/graph" and any(m in message for m in _NOT_GRAPH))
])
def test_malformed_requests_get_a_4xx_with_a_clear_message(client, raw, message, path):
    resp = client.post(path, data=raw, content_type="application/json")
    assert resp.status_code == 400, (resp.status_code, resp.data[:200])
    assert message in resp.json["error"], resp.json["error"]
    assert "Traceback" not in resp.json["error"] and "internal error" not in resp.json["error"]


def test_an_unexpected_failure_is_a_500_without_internals(tiny, monkeypatch):
    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets)
    engine = app.extensions["prxai_explorer"]

    def broken(*args, **kwargs):
        raise KeyError("secret internal detail")

    monkeypatch.setattr(engine, "stats", broken)
    resp = app.test_client().get("/api/stats")
    assert resp.status_code == 500 and "secret" not in resp.json["error"]
    assert resp.json["error"] == "internal error; the details are in the explorer's log."


def test_a_10_mb_chunked_body_gets_413_and_the_connection_closes(app):
    import socket

    from captum_prxai.explorer import ServerThread

    with ServerThread(app, port=0) as server:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        try:
            sock.sendall(b"POST /api/explain HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            chunk = b'{"text": "' + b"a" * 65526
            for _ in range(160):  # 160 x 64 KiB = 10 MiB
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
            sock.shutdown(socket.SHUT_WR)
            reply = b""
            while True:  # read to the end: the server must close the connection
                data = sock.recv(65536)
                if not data:
                    break
                reply += data
        finally:
            sock.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head[:80]
    assert b"Connection: close" in head
    assert b"the request is larger than 256 KB" in body


def test_cross_origin_posts_are_refused(client):
    body = {"text": "a good film", "methods": ["pr-a"]}
    resp = client.post("/api/explain", json=body, headers={"Origin": "http://evil.example"})
    assert resp.status_code == 403 and "cross-origin request from 'http://evil.example'" in resp.json["error"]
    resp = client.post("/api/explain", json=body, headers={"Referer": "http://evil.example/page"})
    assert resp.status_code == 403
    resp = client.post("/api/explain", json=body, headers={"Origin": "null"})
    assert resp.status_code == 403
    resp = client.post("/api/explain", json=body, headers={"Origin": "http://localhost"})  # the test client's host
    assert resp.status_code in (200, 202), resp.json
    assert client.get("/api/info", headers={"Origin": "http://localhost"}).status_code == 200  # its own page


# ----------------------------------------------------------------------------- lanes, cancel, estimates
@pytest.fixture
def slow_method():
    """A registered many-pass method that calls the model until released (or cancelled)."""
    import threading

    from captum_prxai.methods import Explainer, register_method

    state = {"release": threading.Event(), "started": threading.Event(), "calls": 0}

    def factory(model, forward, ctx):
        def run(ids, mask, special, target):
            state["started"].set()
            while not state["release"].wait(0.005):
                forward(ids, mask)  # the explorer's guarded forward: raises once the job is cancelled
                state["calls"] += 1
            return torch.zeros(ids.shape)

        return Explainer("explorer-test-slow", "Slow", run)

    register_method("explorer-test-slow", "Slow", "perturbation", "calls the model until released", factory)
    try:
        yield state
    finally:
        state["release"].set()
        METHODS.pop("explorer-test-slow", None)


def test_cancel_stops_a_running_method_and_drops_the_rest(tiny, slow_method):
    model, tokenizer, datasets = tiny
    client = create_app(model, tokenizer, datasets).test_client()
    job = client.post("/api/explain", json={"text": "a good film", "methods": ["explorer-test-slow", "lime"]}).json
    assert slow_method["started"].wait(30)
    resp = client.post(f"/api/jobs/{job['id']}/cancel")
    assert resp.status_code == 200
    final = wait(client, resp.json)
    assert final["status"] == "cancelled" and final["cancelled"] is True
    assert final["errors"] == [{"method": "explorer-test-slow", "error": "cancelled"},
                               {"method": "lime", "error": "cancelled"}]
    assert not slow_method["release"].is_set()  # it stopped because of the cancel, not because it was released
    assert client.post("/api/jobs/" + "0" * 32 + "/cancel").status_code == 404
    # the lane is free again
    assert wait(client, client.post("/api/explain", json={"text": "a bad film", "methods": ["lime"],
                                                          "params": {"samples": 20}}).json)["status"] == "done"


def test_predictions_and_fast_methods_do_not_wait_for_a_long_job(tiny, slow_method):
    """A second tab gets its prediction and a PR-G heatmap while the slow lane is busy."""
    model, tokenizer, datasets = tiny
    client = create_app(model, tokenizer, datasets).test_client()
    slow = client.post("/api/explain", json={"text": "a good film", "methods": ["explorer-test-slow"]}).json
    assert slow_method["started"].wait(30)
    other = client.post("/api/explain", json={"text": "the plot was dull", "methods": ["pr-g", "rollout"]})
    assert other.status_code in (200, 202) and other.json["input"]["probabilities"]  # the prediction is there
    done = wait(client, other.json)
    assert done["status"] == "done" and [r["method"] for r in done["results"]] == ["pr-g", "rollout"]
    page = client.get("/api/examples?dataset=tiny-reviews&predicted=1&limit=3")  # needs predictions
    assert page.status_code == 200 and page.json["items"]
    assert client.get(f"/api/jobs/{slow['id']}").json["status"] == "running"  # still running all along
    slow_method["release"].set()
    assert wait(client, slow)["status"] == "done"


def test_load_concurrent_mixed_jobs_finish_or_are_cancelled(tiny, slow_method):
    """Several threads post mixed jobs (one deliberately slow, then cancelled) to a real loopback server."""
    import json as json_
    import threading
    import urllib.request

    from captum_prxai.explorer import ServerThread

    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets)
    bodies = [{"text": t, "methods": m, "params": {"samples": 20, "ig_steps": 8}}
              for t, m in [("a good film", ["pr-g", "ig"]), ("a bad film", ["lime", "pr-a"]),
                           ("the plot was dull", ["rollout", "occlusion"]), ("fun fun fun", ["kernel-shap"]),
                           ("very good movie", ["gae", "saliency"]), ("not fun", ["pr-ag", "ixg"])] * 2]
    results, errors = {}, []

    with ServerThread(app, port=0) as server:
        def call(path, body=None, session="a" * 32):  # each worker is a client with its own session
            req = urllib.request.Request(server.url + path.lstrip("/"), method="GET" if body is None else "POST",
                                         data=None if body is None else json_.dumps(body).encode(),
                                         headers={"Content-Type": "application/json", "X-PRXAI-Session": session})
            with urllib.request.urlopen(req, timeout=60) as resp:
                return json_.loads(resp.read())

        slow = call("/api/explain", {"text": "a good film", "methods": ["explorer-test-slow"]})
        assert slow_method["started"].wait(30)
        ids = {}

        def worker(i):
            try:
                job = call("/api/explain", bodies[i], session=f"{i:032x}")
                ids[i] = job["id"]
                while job["status"] not in ("done", "cancelled"):
                    time.sleep(0.05)
                    job = call(f"/api/jobs/{job['id']}", session=f"{i:032x}")
                results[i] = job
            except Exception as err:  # noqa: BLE001 - collected and asserted below
                errors.append(repr(err))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(bodies))]
        for t in threads:
            t.start()
        # while the slow job holds the many-pass lane, every job's one-pass methods finish
        fast = {m["name"] for m in call("/api/info")["methods"] if m["lane"] == "fast"}
        deadline = time.monotonic() + 180
        while True:
            assert time.monotonic() < deadline and not errors, errors
            snaps = {i: call(f"/api/jobs/{job_id}", session=f"{i:032x}") for i, job_id in list(ids.items())}
            if len(snaps) == len(bodies) and all(
                    {r["method"] for r in snap["results"]} >= fast & set(bodies[i]["methods"])
                    for i, snap in snaps.items()):
                break
            time.sleep(0.1)
        assert call(f"/api/jobs/{slow['id']}")["status"] == "running"
        call(f"/api/jobs/{slow['id']}/cancel", {})  # then the many-pass methods queued behind it run
        for t in threads:
            t.join(timeout=240)
        assert call(f"/api/jobs/{slow['id']}")["status"] == "cancelled"
        stats = call("/api/stats")
    assert errors == [] and len(results) == len(bodies)
    for i, job in results.items():
        assert job["status"] == "done" and job["errors"] == [], job["errors"]
        assert [r["method"] for r in job["results"]] == bodies[i]["methods"]
    assert stats["queued"] == {"fast": 0, "slow": 0}


def test_estimate_confirmation_and_limit(tiny):
    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets, confirm_seconds=0.0, max_method_seconds=3600)
    client = app.test_client()
    body = {"text": "a good film and a great story", "methods": ["shapley", "pr-g"], "params": {"permutations": 4}}
    est = client.post("/api/estimate", json=body).json
    by = {e["method"]: e for e in est["estimates"]}
    real = 7  # words of the text, without [CLS] and [SEP]
    assert by["shapley"]["evaluations"] == 4 * real + 1 and by["shapley"]["detail"] == f"4 permutations x {real} tokens"
    assert by["pr-g"]["evaluations"] == 3 and by["shapley"]["lane"] == "slow" and by["pr-g"]["lane"] == "fast"
    assert by["shapley"]["seconds"] > by["pr-g"]["seconds"] > 0
    resp = client.post("/api/explain", json=body)  # over confirm_seconds=0: the page must ask first
    assert resp.status_code == 409 and resp.json["needs_confirmation"] is True
    assert "this will take about" in resp.json["error"] and len(resp.json["estimates"]) == 2
    job = wait(client, client.post("/api/explain", json=dict(body, confirmed=True)).json)
    assert job["status"] == "done"

    strict = create_app(model, tokenizer, datasets, max_method_seconds=1e-9).test_client()
    resp = strict.post("/api/explain", json=body)
    assert resp.status_code == 422
    assert resp.json["error"].startswith("Shapley sampling would take about")
    assert "--max-method-seconds" in resp.json["error"]


def test_samples_help_says_what_it_counts(client):
    params = {p["key"]: p for p in client.get("/api/info").json["params"]}
    assert "one model evaluation per token" in params["permutations"]["help"]
    assert "one model evaluation each" in params["samples"]["help"]
    assert "forward and one backward pass" in params["ig_steps"]["help"]


# ----------------------------------------------------------------------------- memory
def test_ig_runs_in_memory_bounded_batches_with_the_same_scores(tiny):
    model, tokenizer, datasets = tiny
    roomy = create_app(model, tokenizer, datasets, memory_budget_mb=4096).test_client()
    tight = create_app(model, tokenizer, datasets, memory_budget_mb=0.05)
    engine = tight.extensions["prxai_explorer"]
    tokens = len(tokenizer("a great film but a dull plot")["input_ids"])
    assert engine.batch_size_for(tokens, backward=True) < 8 <= engine.batch_size_for(tokens, backward=False) * 8
    assert engine.batch_size_for(4 * tokens, backward=True) <= engine.batch_size_for(tokens, backward=True)
    body = {"text": "a great film but a dull plot", "methods": ["ig", "occlusion"], "params": {"ig_steps": 8}}
    a = wait(roomy, roomy.post("/api/explain", json=body).json)
    tight_client = tight.test_client()
    b = wait(tight_client, tight_client.post("/api/explain", json=body).json)
    batch = {r["method"]: r["batch"] for r in b["results"]}
    assert batch["ig"] == engine.batch_size_for(tokens, backward=True) < 8
    assert {r["method"]: r["batch"] for r in a["results"]}["ig"] == 8
    for ra, rb in zip(a["results"], b["results"]):
        assert rb["scores"] == pytest.approx(ra["scores"], rel=1e-4, abs=1e-6)


def test_release_memory_and_rss():
    from captum_prxai.explorer.engine import release_memory, rss_bytes

    release_memory()  # no error on any platform
    import sys

    if sys.platform.startswith("linux"):
        assert rss_bytes() > 10 * 2 ** 20


# ----------------------------------------------------------------------------- export and display
def test_export_is_exactly_the_jobs_results(client):
    job = explain(client, text="the story was not good", methods=["pr-a", "rollout"], target=1,
                  params={"damping": 0.5})
    # the form changes afterwards (other methods, parameters, class): the export still shows the job
    resp = client.post("/api/export", json={"job": job["id"], "merge_subwords": False, "palette": "default",
                                            "graph": {"method": "pr-a", "top_edges": 4, "nodes": 4,
                                                      "layout": "circle"}})
    assert resp.status_code == 200, resp.data[:300]
    page = resp.get_data(as_text=True)
    assert "Why positive?" in page and "explained class: positive" in page
    assert page.count('class="prx-heatmap"') == 2 and "PR-A (damping=0.5" in page
    for result in job["results"]:
        shown = [float(x) for x in re.findall(r'data-score="([^"]+)"', result["html"])]
        block = page.split(f'data-method="{result["label"]}"', 1)[1].split('class="prx-legend"', 1)[0]
        exported = [float(x) for x in re.findall(r'data-score="([^"]+)"', block)]
        assert exported == pytest.approx(shown, rel=1e-3)
    drawn = draw_graph(client, text="the story was not good", method="pr-a", target=1, params={"damping": 0.5},
                  top_edges=4, nodes=4, layout="circle")
    assert drawn["svg"] in page and drawn["title"] in page  # the graph as the page drew it
    assert ".prx-graph svg{max-width:100%" in page
    resp = client.post("/api/export", json={"job": "f" * 32})
    assert resp.status_code == 404


def test_colour_blind_palette_keeps_the_scale_and_drops_red_green():
    from captum_prxai.explorer.app import recolor_heatmap
    from captum_prxai.viz.html import token_heatmap_html

    html = token_heatmap_html(["[CLS]", "good", "bad", "film"], [0.0, 0.8, -0.4, 0.1], method="X")
    safe = recolor_heatmap(html, "colorblind")
    assert recolor_heatmap(html, "default") == html
    colours = re.findall(r"background-color:rgb\((\d+),(\d+),(\d+)\)", safe)
    greenish = [c for c in colours if int(c[1]) > int(c[0]) + 40 and int(c[1]) > int(c[2]) + 40]
    assert len(colours) == 4 and greenish == []
    good, bad = (tuple(map(int, c)) for c in colours[1:3])
    assert good[2] > good[0] and bad[0] > bad[2]  # blue for, orange against
    assert re.findall(r'data-score="[^"]+"', safe) == re.findall(r'data-score="[^"]+"', html)
    with pytest.raises(PRXAIError, match="palette must be one of"):
        recolor_heatmap(html, "rainbow")


def test_merge_and_palette_rerender_without_recomputing(client):
    job = explain(client, text="a playing film", methods=["pr-a"])
    calls = client.get("/api/stats").json["attribution_misses"]
    merged = client.get(f"/api/jobs/{job['id']}?merge_subwords=true&palette=colorblind").json
    assert merged["merge_subwords"] is True and merged["palette"] == "colorblind"
    assert merged["results"][0]["html"] != job["results"][0]["html"]
    assert merged["results"][0]["scores"] == job["results"][0]["scores"]
    assert client.get("/api/stats").json["attribution_misses"] == calls
    assert client.get(f"/api/jobs/{job['id']}?palette=rainbow").status_code == 400


# ----------------------------------------------------------------------------- your own model and data
def test_own_data_from_a_list_and_a_dataframe(tiny):
    pd = pytest.importorskip("pandas")
    model, tokenizer, _ = tiny
    frame = pd.DataFrame({"text": ["a good film", "a bad film", "fun fun fun"], "label": [1, 0, 1]})
    app = create_app(model, tokenizer, {"frame": frame, "pairs": [("the plot was dull", "neg"), ("great", "pos")]})
    client = app.test_client()
    summary = client.get("/api/datasets/frame").json
    assert summary["size"] == 3 and summary["label_counts"] == [1, 2]
    pairs = client.get("/api/datasets/pairs").json
    assert pairs["label_names"] == ["neg", "pos"] and pairs["label_counts"] == [1, 1]
    job = explain(client, example={"dataset": "frame", "index": 2}, methods=["pr-a"])
    assert job["input"]["text"] == "fun fun fun" and job["input"]["source"]["label"] == 1
    with pytest.raises(PRXAIError, match="every text must be a string"):
        create_app(model, tokenizer, {"bad": [(1, 0)]})


def test_a_custom_forward_func(tiny):
    """A model whose output is not `.logits`: the forward function gets each lane's copy of the model."""
    model, tokenizer, datasets = tiny
    seen = set()

    def forward(m, input_ids, attention_mask):
        seen.add(id(m))
        return m(input_ids=input_ids, attention_mask=attention_mask).logits * 2.0  # a different scale

    client = create_app(model, tokenizer, datasets, forward_func=forward).test_client()
    job = explain(client, text="a good film", methods=["pr-g", "ig"], params={"ig_steps": 4})
    enc = tokenizer("a good film", return_tensors="pt")
    with torch.no_grad():
        probs = (model(**enc).logits * 2.0).softmax(-1)[0]
    assert job["input"]["probabilities"] == pytest.approx(probs.tolist(), abs=1e-6)
    assert job["status"] == "done" and job["errors"] == []
    assert len(seen) >= 2  # the prediction lane and a method lane use different copies


# ----------------------------------------------------------------------------- several models side by side
def test_two_models_side_by_side(tiny):
    import copy

    model, tokenizer, datasets = tiny
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.classifier.weight.mul_(-1.0)  # the other model prefers the other class
    app = create_app(model, tokenizer, datasets, model_name="tuned", compare={"flipped": (other, tokenizer)})
    client = app.test_client()
    info = client.get("/api/info").json
    assert [m["name"] for m in info["models"]] == ["tuned", "flipped"]
    body = {"example": {"dataset": "tiny-reviews", "index": 0}, "methods": ["pr-g", "ig"], "params": {"ig_steps": 4}}
    a = explain(client, **body)
    b = explain(client, **body, model="flipped")
    assert a["model"] == "tuned" and b["model"] == "flipped"
    enc = tokenizer(TEXTS[0][0], return_tensors="pt")
    with torch.no_grad():
        for job, m in ((a, model), (b, other)):
            assert job["input"]["probabilities"] == pytest.approx(m(**enc).logits.softmax(-1)[0].tolist(), abs=1e-6)
    assert a["input"]["predicted"] != b["input"]["predicted"]
    assert a["input"]["tokens"] == b["input"]["tokens"]  # aligned token by token
    assert [r["method"] for r in b["results"]] == ["pr-g", "ig"]
    assert b["results"][0]["scores"] != a["results"][0]["scores"]
    # each model has its own cache and stats; jobs of either are found and exported with their model
    assert client.get("/api/stats?model=flipped").json["attributions_cached"] == 2
    page = client.post("/api/export", json={"job": b["id"]}).get_data(as_text=True)
    assert "model: flipped" in page
    resp = client.post("/api/explain", json=dict(body, model="nope"))
    assert resp.status_code == 400 and "unknown model 'nope'; the explorer serves: tuned, flipped" in resp.json["error"]
    with pytest.raises(PRXAIError, match="two models are named 'tuned'"):
        create_app(model, tokenizer, datasets, model_name="tuned", compare={"tuned": (other, tokenizer)})


def test_notebook_show_serves_and_embeds(tiny, monkeypatch):
    import json as json_
    import urllib.request

    pytest.importorskip("IPython")
    import IPython.display

    from captum_prxai.explorer import show

    shown = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    model, tokenizer, _ = tiny
    server = show(model, tokenizer, {"mine": [("a good film", 1), ("a bad film", 0)]}, height=500, model_name="nb")
    try:
        assert len(shown) == 1 and shown[0].src == server.url and shown[0].height == 500
        with urllib.request.urlopen(server.url + "api/info", timeout=30) as resp:
            info = json_.loads(resp.read())
        assert info["model"] == "nb" and info["datasets"] == ["mine"]
        with urllib.request.urlopen(server.url, timeout=30) as resp:
            csp = resp.headers["Content-Security-Policy"]
        assert "frame-ancestors 'self' http://localhost:* http://127.0.0.1:*" in csp  # a local notebook may embed it
    finally:
        server.stop()


def test_ig_baseline_form(client, tiny):
    """IG's baseline is a per-method argument: [MASK] instead of [PAD] changes the reference and the scores."""
    from captum.attr import LayerIntegratedGradients

    model, tokenizer, _ = tiny
    pad = explain(client, text="a good film", methods=["ig"], params={"ig_steps": 6})["results"][0]
    mask = explain(client, text="a good film", methods=["ig"], params={"ig_steps": 6, "ig_baseline": "mask"})
    mask = mask["results"][0]
    assert mask["params"] == {"ig_steps": 6, "ig_baseline": "mask"} and mask["cached"] is False
    enc = tokenizer("a good film", return_tensors="pt")
    ids = enc["input_ids"]
    reference = ids.clone()
    reference[0, 1:-1] = tokenizer.mask_token_id
    lig = LayerIntegratedGradients(make_forward_func(model), model.get_input_embeddings())
    target = explain(client, text="a good film", methods=["pr-a"])["input"]["target"]
    expected = lig.attribute(ids, baselines=reference, target=target, additional_forward_args=(enc["attention_mask"],),
                             n_steps=6, method="gausslegendre").sum(-1)[0]
    assert mask["scores"] == pytest.approx(expected.tolist(), rel=1e-4, abs=1e-6)
    assert mask["scores"] != pad["scores"]


# ----------------------------------------------------------------------------- third round (issue 64, issue 62)
def _session_client(app, n):
    """A test client whose requests carry the page session header of client ``n``."""
    client = app.test_client(use_cookies=False)
    client.environ_base["HTTP_X_PRXAI_SESSION"] = f"{n:032x}"
    return client


def test_picker_features_at_most_8_methods_and_marks_the_default(client):
    """Issue 62: the picker shows the featured methods first (at most 8), the default marked, the rest by family."""
    from captum_prxai.methods import FEATURED_METHODS, default_method

    info = client.get("/api/info").json
    model = client.application.extensions["prxai_explorer"].model
    assert info["featured"] == [m for m in FEATURED_METHODS if m in METHODS] and 0 < len(info["featured"]) <= 8
    assert info["default_method"] == default_method(model) and info["default_method"] in info["featured"]
    assert info["featured"][0] == info["default_method"]
    labels = {m["name"]: m["label"] for m in info["methods"]}
    assert all(labels[m] == METHODS[m].label for m in info["featured"])
    assert set(info["family_names"]) == {m["family"] for m in info["methods"]}
    js = client.get("/static/app.js").get_data(as_text=True)
    assert "More methods" in js and "(default)" in js and "info.family_names[fam]" in js


def test_methods_say_whether_they_are_signed_and_cards_use_that_scale(client):
    """Item 10: the colour scale follows MethodSpec.signed: diverging for signed methods, sequential for unsigned."""
    info = client.get("/api/info").json
    assert {m["name"]: m["signed"] for m in info["methods"]} == {n: METHODS[n].signed for n in METHODS}
    unsigned = next(n for n in ("pr-a", "rollout") if not METHODS[n].signed)
    signed = next(n for n in ("ig", "pr-xai") if METHODS[n].signed)
    job = explain(client, text="the story was not good", methods=[unsigned, signed], params={"ig_steps": 4})
    by = {r["method"]: r for r in job["results"]}
    assert 'data-signed="false"' in by[unsigned]["html"] and by[unsigned]["scale"]["signed"] is False
    assert 'data-signed="true"' in by[signed]["html"] and by[signed]["scale"]["signed"] is True
    assert "sequential scale from 0" in by[unsigned]["scale"]["text"]
    assert "diverging scale centred on 0" in by[signed]["scale"]["text"]


def test_a_shared_colour_scale_per_row_and_across_rows(client):
    """Item 10: 'row' puts one scale on a row's cards (on each method's share of its total |score|), 'all' one on
    every row; each card says which it uses."""
    job = explain(client, text="the story was not good", methods=["pr-a", "rollout", "ig"], params={"ig_steps": 4})
    own = {r["method"]: r["scale"] for r in job["results"]}
    assert all(s["mode"] == "own" and "its own" in s["text"] for s in own.values())
    row = client.get(f"/api/jobs/{job['id']}?scale=row").json
    shares = {m: s["share"] for m, s in own.items()}
    widest = max(shares, key=shares.__getitem__)
    for r in row["results"]:
        scale = r["scale"]
        assert scale["mode"] == "row" and "shared by this row" in scale["text"]
        assert scale["top"] >= own[r["method"]]["top"] * (1 - 1e-9)  # no card is clipped by the shared scale
        # the top is the same share of every method's total |score|: the largest share in the row
        assert scale["top"] / own[r["method"]]["top"] * shares[r["method"]] == pytest.approx(shares[widest])
    assert next(r for r in row["results"] if r["method"] == widest)["scale"]["top"] == pytest.approx(
        own[widest]["top"])
    everything = client.get(f"/api/jobs/{job['id']}?scale=all&share=0.9").json
    for r in everything["results"]:
        assert "shared by every row shown" in r["scale"]["text"] and "90%" in r["scale"]["text"]
    heat = [re.findall(r"background-color:(rgb\([^)]*\))", r["html"]) for r in (row, everything)
            for r in r["results"][:1]]
    assert heat[0] != heat[1]  # a larger shared top pales the colours
    assert client.get(f"/api/jobs/{job['id']}?scale=global").status_code == 400
    assert client.get(f"/api/jobs/{job['id']}?scale=all&share=2").status_code == 400
    page = client.post("/api/export", json={"job": job["id"], "scale": "row"}).get_data(as_text=True)
    assert page.count("shared by this row") == 3  # the export says so on each heatmap too


def test_top_tokens_are_one_list_for_the_cards_and_the_export(client):
    """Item 11: the cards' top tokens leave out [CLS]/[SEP], follow 'merge word pieces', and are the export's."""
    from captum_prxai.viz.tokens import top_words
    from captum_prxai.explorer.app import TOP_TOKENS

    job = explain(client, text="a playing film", methods=["pr-a", "rollout"])
    tokens, explained = job["input"]["tokens"], job["input"]["explained_position"]
    for merge in (False, True):
        shown = client.get(f"/api/jobs/{job['id']}?merge_subwords={str(merge).lower()}").json
        for r in shown["results"]:
            assert [tuple(t) for t in r["top"]] == top_words(tokens, r["scores"], merge, TOP_TOKENS, explained)
            words = [w for w, _ in r["top"]]
            assert not {"[CLS]", "[SEP]"} & set(words)
            assert ("playing" in words) is merge and ("##ing" in words or "ing" in words) is not merge
        page = client.post("/api/export", json={"job": job["id"], "merge_subwords": merge}).get_data(as_text=True)
        table = page.split('class="prx-top"', 1)[1].split("</table>", 1)[0]
        assert 3 <= min(len(r["top"]) for r in shown["results"]) <= TOP_TOKENS
        for k in range(min(len(r["top"]) for r in shown["results"])):
            row = [re.escape(r["top"][k][0]) for r in shown["results"]]
            assert re.search(r"<tr><td class=\"prx-num\">%d</td><td>%s <small>.*?</small></td><td>%s <small>"
                             % (k + 1, row[0], row[1]), table), (k, row)


def test_the_header_style_does_not_collapse_the_top_token_bars(client):
    """Item 3: no rule of the page's own style matches the cards' top-token box but the box's own
    (the header's '.top' rule made it a flex box that collapsed the bars to 0 px; the browser test measures them)."""
    css = client.get("/static/style.css").get_data(as_text=True)
    assert not re.search(r"(^|[\s,}])\.top\b(?!-)", css)  # the header's class is .topbar now
    assert "details.top-tokens" in css
    assert b'class="topbar"' in client.get("/").data


def test_bad_display_options_are_400_before_any_job(tiny):
    """Item 6: a palette or scale of the wrong type or value is a 400 on every endpoint, before any job starts;
    an empty value is refused too, never taken as the default."""
    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets)
    client = app.test_client()
    runner = app.extensions["prxai_explorer_jobs"]
    done = explain(client, text="a good film", methods=["pr-a"])
    for bad in (["x"], {"a": 1}, [], "", "rainbow", 3, True):
        before = len(runner._jobs)
        for path in ("/api/explain", "/api/export"):
            resp = client.post(path, json={"text": "a bad film", "methods": ["pr-g"], "palette": bad})
            assert resp.status_code == 400, (path, bad, resp.status_code)
            assert "'palette' must be one of default, colorblind" in resp.json["error"]
        resp = client.post("/api/explain", json={"text": "a bad film", "methods": ["pr-g"], "scale": bad})
        assert resp.status_code == 400 and "'scale' must be one of own, row, all" in resp.json["error"]
        assert client.post("/api/export", json={"job": done["id"], "palette": bad}).status_code == 400
        assert len(runner._jobs) == before  # nothing was submitted
    assert client.get(f"/api/jobs/{done['id']}?palette=x").status_code == 400
    assert client.get(f"/api/jobs/{done['id']}?palette=").status_code == 200  # an empty query argument: left out
    resp = client.post("/api/explain", json={"example": {"dataset": [], "index": 0}, "methods": ["pr-a"]})
    assert resp.status_code == 400 and "'example.dataset' must be a dataset name" in resp.json["error"]
    resp = client.post("/api/graph", json={"text": "a good film", "method": "pr-a", "layout": ""})
    assert resp.status_code == 400 and "'layout' must be one of line, circle" in resp.json["error"]


def test_gets_from_another_origin_are_refused(tiny):
    """Item 7: a foreign page cannot make /api/examples (or any /api/ read) predict a dataset."""
    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets)
    client = app.test_client()
    engine = app.extensions["prxai_explorer"]
    url = "/api/examples?dataset=tiny-reviews&predicted=1&limit=50"
    for headers in ({"Origin": "http://evil.example"}, {"Referer": "http://evil.example/page"},
                    {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}, {"Origin": "null"}):
        resp = client.get(url, headers=headers)
        assert resp.status_code == 403 and "cross-origin request" in resp.json["error"], headers
    assert engine.prediction_calls == 0  # no CPU was spent
    assert client.get("/api/info", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert client.get(url, headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200
    assert engine.prediction_calls > 0
    # the page itself may be opened from a link or embedded (a notebook at another port)
    assert client.get("/", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 200


def test_notebook_server_prints_no_request_lines_and_allows_ipv6_loopback(tiny, capfd):
    """Item 8: Werkzeug's request lines stay out of a notebook cell; a notebook at http://[::1] may embed the page."""
    import logging
    import urllib.request

    from captum_prxai.explorer import ServerThread

    model, tokenizer, datasets = tiny
    logging.getLogger("werkzeug").setLevel(logging.INFO)  # as in a fresh kernel: werkzeug would log each request
    with ServerThread(create_app(model, tokenizer, datasets), port=0) as server:
        with urllib.request.urlopen(server.url + "api/info", timeout=30) as resp:
            assert resp.status == 200
            csp = resp.headers["Content-Security-Policy"]
    out, err = capfd.readouterr()
    assert "GET /api/info" not in out + err
    assert "frame-ancestors 'self' http://localhost:* http://127.0.0.1:*" in csp
    # CSP cannot name [::1]: the page framed by a notebook on it (its Referer) goes without frame-ancestors
    client = create_app(model, tokenizer, datasets).test_client()
    framed = client.get("/", headers={"Referer": "http://[::1]:8888/notebooks/x.ipynb"})
    assert framed.status_code == 200 and "frame-ancestors" not in framed.headers["Content-Security-Policy"]
    for referer in ("http://evil.example/", "http://[::2]:8888/", "http://[::1"):
        other = client.get("/", headers={"Referer": referer}).headers["Content-Security-Policy"]
        assert "frame-ancestors 'self' http://localhost:* http://127.0.0.1:*" in other, referer
    assert "frame-ancestors" in client.get("/").headers["Content-Security-Policy"]


def test_jobs_belong_to_their_session(tiny, slow_method):
    """Item 2: another client cannot read or cancel a job by its id."""
    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets)
    mine, other = _session_client(app, 1), _session_client(app, 2)
    job = mine.post("/api/explain", json={"text": "a good film", "methods": ["explorer-test-slow"]}).json
    assert slow_method["started"].wait(30)
    assert other.get(f"/api/jobs/{job['id']}").status_code == 404
    resp = other.post(f"/api/jobs/{job['id']}/cancel")
    assert resp.status_code == 404 and "in this page's session" in resp.json["error"]
    assert other.post("/api/export", json={"job": job["id"]}).status_code == 404
    assert mine.get(f"/api/jobs/{job['id']}").json["status"] == "running"  # untouched
    anonymous = app.test_client()  # no header: the server gives it a session cookie of its own
    resp = anonymous.get(f"/api/jobs/{job['id']}")
    assert resp.status_code == 404 and "prxai_session=" in resp.headers.get("Set-Cookie", "")
    assert "prxai_session=" in app.test_client().get("/").headers.get("Set-Cookie", "")
    slow_method["release"].set()
    assert wait(mine, job)["status"] == "done"


def test_one_client_cannot_evict_another_clients_running_job(tiny, slow_method):
    """Item 2: 250 cached requests of one client forget only its own finished jobs; a running job is never
    forgotten; a client has a quota of unfinished jobs."""
    from captum_prxai.explorer.app import ACTIVE_JOBS_PER_CLIENT

    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets)
    victim, flood = _session_client(app, 1), _session_client(app, 2)
    running = victim.post("/api/explain", json={"text": "a good film", "methods": ["explorer-test-slow"]}).json
    assert slow_method["started"].wait(30)
    finished = explain(victim, text="a bad film", methods=["pr-a"])
    first = explain(flood, text="fun fun fun", methods=["pr-a"])
    for _ in range(250):  # cached: done at once
        resp = flood.post("/api/explain", json={"text": "fun fun fun", "methods": ["pr-a"]})
        assert resp.status_code == 200
    assert victim.get(f"/api/jobs/{running['id']}").json["status"] == "running"
    assert victim.get(f"/api/jobs/{finished['id']}").status_code == 200
    assert flood.get(f"/api/jobs/{first['id']}").status_code == 404  # the flood's own oldest went
    # a quota of unfinished jobs per client
    queued = [victim.post("/api/explain", json={"text": f"a good film {'!' * k}", "methods": ["lime"],
                                                "params": {"samples": 10}})
              for k in range(ACTIVE_JOBS_PER_CLIENT - 1)]
    assert all(r.status_code == 202 for r in queued)  # queued behind the slow method on the slow lane
    resp = victim.post("/api/explain", json={"text": "the plot was dull", "methods": ["lime"]})
    assert resp.status_code == 429 and "jobs running or queued" in resp.json["error"]
    assert flood.post("/api/explain", json={"text": "the plot was dull", "methods": ["pr-g"]}).status_code in (200, 202)
    slow_method["release"].set()
    for r in queued:
        assert wait(victim, r.json)["status"] == "done"


def test_export_of_an_explain_body_goes_through_the_limits(tiny):
    """Item 1: the export's explain body is refused as /api/explain refuses it (422, 409), and runs as a job."""
    model, tokenizer, datasets = tiny
    body = {"text": "a good film and a great story", "methods": ["shapley"], "params": {"permutations": 200}}
    strict = create_app(model, tokenizer, datasets, max_method_seconds=1e-6).test_client()
    for path in ("/api/explain", "/api/export"):
        resp = strict.post(path, json=body)
        assert resp.status_code == 422 and resp.json["error"].startswith("Shapley sampling would take about"), path
    asking = create_app(model, tokenizer, datasets, confirm_seconds=0.0)
    client = asking.test_client()
    resp = client.post("/api/export", json=dict(body, params={"permutations": 2}))
    assert resp.status_code == 409 and resp.json["needs_confirmation"] is True
    resp = client.post("/api/export", json=dict(body, params={"permutations": 2}, confirmed=True))
    assert resp.status_code == 200 and resp.headers["Content-Disposition"].startswith("attachment")
    assert 'data-method="Shapley sampling"' in resp.get_data(as_text=True)
    assert asking.extensions["prxai_explorer_jobs"].queued() == {"slow": 0}  # it ran on the many-pass lane


def test_an_export_whose_client_leaves_is_cancelled(tiny, slow_method):
    """Item 1: an export computing an explain body stops when its client closes the connection."""
    import json as json_
    import socket as socket_
    import urllib.request

    from captum_prxai.explorer import ServerThread

    model, tokenizer, datasets = tiny
    with ServerThread(create_app(model, tokenizer, datasets), port=0) as server:
        body = json_.dumps({"text": "a good film", "methods": ["explorer-test-slow"]}).encode()
        sock = socket_.create_connection(("127.0.0.1", server.port), timeout=30)
        sock.sendall(b"POST /api/export HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        assert slow_method["started"].wait(30)

        def stats():
            with urllib.request.urlopen(server.url + "api/stats", timeout=30) as resp:
                return json_.loads(resp.read())

        assert stats()["running"] == ["explorer-test-slow"]
        sock.close()  # the client leaves
        deadline = time.monotonic() + 30
        while stats()["running"]:
            assert time.monotonic() < deadline, "the export's job still runs after its client left"
            time.sleep(0.05)
        calls = slow_method["calls"]
        time.sleep(0.3)
        assert slow_method["calls"] == calls and not slow_method["release"].is_set()  # stopped by the cancel


def test_export_with_two_models_holds_both(tiny):
    """Item 5: exporting the jobs of two models gives one section per model, each with its heatmaps."""
    import copy

    model, tokenizer, datasets = tiny
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.classifier.weight.mul_(-1.0)
    client = create_app(model, tokenizer, datasets, model_name="tuned",
                        compare={"flipped": (other, tokenizer)}).test_client()
    body = {"text": "a good film", "methods": ["pr-a", "rollout"]}
    a, b = explain(client, **body), explain(client, **body, model="flipped")
    page = client.post("/api/export", json={"job": [a["id"], b["id"]], "scale": "all"}).get_data(as_text=True)
    sections = re.findall(r'<section class="prx-model" data-model="([^"]+)">(.*?)</section>', page, re.S)
    assert [name for name, _ in sections] == ["tuned", "flipped"]
    for (name, html), job in zip(sections, (a, b)):
        assert html.count('class="prx-heatmap"') == 2 and f"model: {name}" in html
        assert f"predicted: <b>{job['input']['predicted_name']}</b>" in html
        exported = [float(x) for x in re.findall(r'data-score="([^"]+)"', html)]
        assert exported == pytest.approx([v for r in job["results"] for v in r["scores"]], rel=1e-6)
    assert page.count("shared by every row shown") == 4
    resp = client.post("/api/export", json={"job": [a["id"], b["id"], a["id"]]})
    assert resp.status_code == 400 and "1 to 2 job ids" in resp.json["error"]


def test_estimates_are_stable_and_calibrated_from_finished_jobs(tiny, monkeypatch):
    """Item 4: a slow forward pass does not move the estimate; after a method ran, its estimate is its time."""
    from captum_prxai.explorer import engine as engine_module

    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets, max_method_seconds=3600, confirm_seconds=3600)
    client = app.test_client()
    engine = app.extensions["prxai_explorer"]
    body = {"text": "a great film but a dull plot", "methods": ["ig"], "params": {"ig_steps": 40}}
    tokens = len(tokenizer(body["text"])["input_ids"])
    for seconds in (0.004, 0.001, 0.002, 0.003, 0.002):  # the first passes timed at this length
        engine._time_forward(tokens, seconds)
    first = client.post("/api/estimate", json=body).json["estimates"][0]
    assert first["seconds"] == pytest.approx(3 * 40 * 0.001)  # the fastest, times 3 evaluations per step
    engine._time_forward(tokens, 100.0)  # a pass slowed down by another process
    assert client.post("/api/estimate", json=body).json["estimates"][0]["seconds"] == first["seconds"]
    assert first["calibrated_runs"] == 0
    assert 3 * 2 * 0.002 < engine_module.CALIBRATION_MIN_SECONDS
    explain(client, **dict(body, params={"ig_steps": 2}))  # estimated far under a second: mostly start-up
    assert client.post("/api/estimate", json=body).json["estimates"][0]["calibrated_runs"] == 0
    monkeypatch.setattr(engine_module, "CALIBRATION_MIN_SECONDS", 0.0)  # this tiny model's runs are all short
    explain(client, text=body["text"], methods=["pr-ag"])
    pr = client.post("/api/estimate", json={"text": body["text"], "methods": ["pr-ag"]}).json["estimates"][0]
    assert pr["calibrated_runs"] == 0 and pr["calibration"] == 1.0  # one pass: not calibrated
    done = explain(client, **body)
    measured = done["results"][0]["seconds"]
    after = client.post("/api/estimate", json=dict(body, params={"ig_steps": 41})).json["estimates"][0]
    assert after["calibrated_runs"] == 1
    assert after["seconds"] == pytest.approx(measured * 41 / 40, rel=1e-9)


def test_the_pages_largest_setting_is_not_refused_on_an_idle_server(tiny):
    """Item 4: /api/estimate gives the page its maximum for the text; the explorer accepts it, and refuses more."""
    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets, confirm_seconds=3600)
    client = app.test_client()
    engine = app.extensions["prxai_explorer"]
    text = "a great film but a dull plot and a boring script"
    for _ in range(6):
        client.post("/api/estimate", json={"text": text, "methods": ["pr-a"]})
    tokens = len(tokenizer(text)["input_ids"])
    engine.max_method_seconds = 150 * 3 * engine.forward_seconds(tokens)  # about 150 IG steps fit
    est = client.post("/api/estimate", json={"text": text, "methods": ["ig", "pr-a"]}).json["estimates"]
    largest = est[0]["largest"]
    assert largest["param"] == "ig_steps" and 100 <= largest["value"] < 150 and est[1]["largest"] is None
    for _ in range(5):
        client.post("/api/estimate", json={"text": text, "methods": ["pr-a"]})  # more timings: no swing
    resp = client.post("/api/explain", json={"text": text, "methods": ["ig"], "params": {"ig_steps": 300}})
    assert resp.status_code == 422
    resp = client.post("/api/explain", json={"text": text, "methods": ["ig"], "params": {"ig_steps": largest["value"]}})
    assert resp.status_code in (200, 202), resp.json
    assert wait(client, resp.json)["status"] == "done"
    js = client.get("/static/app.js").get_data(as_text=True)
    assert 'api("/api/estimate", body)' in js and "input.max = String(top)" in js


def test_progress_and_countdown_of_a_single_long_method(tiny):
    """Items 4 and 9: while one long method runs, its progress grows and its time left counts down."""
    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets, memory_budget_mb=0.02, confirm_seconds=3600)
    client = app.test_client()
    text = "a great film but a dull plot and a boring script with very good acting"
    job = client.post("/api/explain", json={"text": text, "methods": ["ig"], "params": {"ig_steps": 300}}).json
    seen = []
    deadline = time.monotonic() + 120
    while True:
        snap = client.get(f"/api/jobs/{job['id']}").json
        if snap["status"] not in ("queued", "running"):
            break
        if 0 < snap["progress"] < 1:
            seen.append((snap["progress"], snap["estimated_seconds_left"]))
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert snap["status"] == "done" and snap["progress"] == 1.0 and snap["estimated_seconds_left"] == 0
    assert len(seen) >= 3, seen  # polled while it ran
    progress = [p for p, _ in seen]
    assert progress == sorted(progress) and progress[-1] > progress[0]
    assert seen[-1][1] < seen[0][1]  # the time left counts down


def test_a_cancel_before_any_result_leaves_nothing_to_export(tiny, slow_method):
    """Item 9: after a cancel that finished nothing, the export refuses (the page disables Export and Show graph)."""
    model, tokenizer, datasets = tiny
    client = create_app(model, tokenizer, datasets).test_client()
    job = client.post("/api/explain", json={"text": "a good film", "methods": ["explorer-test-slow"]}).json
    assert slow_method["started"].wait(30)
    snap = client.get(f"/api/jobs/{job['id']}").json
    assert snap["progress"] > 0  # the bar moves during the one running method
    final = wait(client, client.post(f"/api/jobs/{job['id']}/cancel").json)
    assert final["status"] == "cancelled" and final["results"] == []
    resp = client.post("/api/export", json={"job": job["id"]})
    assert resp.status_code == 400 and "nothing to export" in resp.json["error"]
    js = client.get("/static/app.js").get_data(as_text=True)
    assert '$("export").disabled = !anyResult' in js and '$("graph-btn").disabled = !anyResult' in js


# ----------------------------------------------------------------------------- fourth round (issue 64)
def test_an_explorer_made_while_hooks_are_on_the_model_copies_none(tiny):
    """The lanes' weight-sharing copies start without the model's hooks: an explorer created on a model while
    another one computes on it (its method's hooks installed) gets neither those hooks nor their effect."""
    from captum_prxai.explorer.engine import share_weights

    model, tokenizer, datasets = tiny
    calls = {"pre": 0, "backward": 0}

    def count_pre(module, args, kwargs):
        calls["pre"] += 1

    def count_backward(module, grad_in, grad_out):
        calls["backward"] += 1

    handles = [
        model.bert.embeddings.register_forward_hook(lambda module, args, out: out * 3.0),  # would change every score
        model.bert.encoder.layer[0].register_forward_pre_hook(count_pre, with_kwargs=True),
        model.classifier.register_full_backward_hook(count_backward),
        model.register_state_dict_pre_hook(lambda *args: None),
    ]
    try:
        assert model.bert.embeddings._forward_hooks and model.classifier._backward_hooks
        app = create_app(model, tokenizer, datasets, model_name="tiny")
        alone = share_weights(model)
    finally:
        for handle in handles:
            handle.remove()
    engine = app.extensions["prxai_explorer"]
    copies = [engine.lanes["fast"].model, engine.lanes["predict"].model, alone]
    assert all(c is not model for c in copies) and len({id(c) for c in copies}) == 3
    for replica in copies:
        for name, module in replica.named_modules():
            hooks = {k: v for k, v in vars(module).items() if "hook" in k and isinstance(v, dict) and v}
            assert hooks == {}, f"{name or 'model'} of a copy carries hooks: {sorted(hooks)}"
            assert module._is_full_backward_hook is None
        assert replica.bert.embeddings.word_embeddings.weight is model.bert.embeddings.word_embeddings.weight
    client = app.test_client()
    text = "the plot was dull"
    job = explain(client, text=text, methods=["pr-ag", "rollout"])
    assert calls == {"pre": 0, "backward": 0}  # no copied hook fired
    enc = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        probs = model(**enc).logits.softmax(-1)[0]
    assert job["input"]["probabilities"] == pytest.approx(probs.tolist(), abs=1e-6)
    forward = make_forward_func(model)
    for result in job["results"]:
        expected = build_method(result["method"], model, forward)(
            enc["input_ids"], enc["attention_mask"], None, torch.tensor([job["input"]["target"]]))[0]
        assert result["scores"] == pytest.approx(expected.tolist(), abs=1e-6), result["method"]
    alone.classifier.register_full_backward_hook(count_backward)  # the copy takes new hooks of its own
    alone(**enc).logits[0, 0].backward()
    assert calls["backward"] == 1


@pytest.fixture
def slow_fast_method():
    """A registered one-pass-lane method (family "gradient") that calls the model until released or cancelled:
    it holds the lane the graph view runs on."""
    import threading

    from captum_prxai.methods import Explainer, register_method

    state = {"release": threading.Event(), "started": threading.Event()}

    def factory(model, forward, ctx):
        def run(ids, mask, special, target):
            state["started"].set()
            while not state["release"].wait(0.005):
                forward(ids, mask)  # the explorer's guarded forward: raises once the job is cancelled
            return torch.zeros(ids.shape)

        return Explainer("explorer-test-slow-fast", "Slow one-pass", run)

    register_method("explorer-test-slow-fast", "Slow one-pass", "gradient", "calls the model until released", factory)
    try:
        yield state
    finally:
        state["release"].set()
        METHODS.pop("explorer-test-slow-fast", None)


def test_the_graph_view_is_a_job_under_the_same_limits_lanes_quota_owner_and_cancel(tiny, slow_fast_method):
    """Item 1, the graph view: /api/graph is a job of the client, like /api/explain: the cost limit (422) and the
    confirmation (409), the client's quota (429), the one-pass lane, its owner alone reads or cancels it, and a
    cancel drops it before its pass."""
    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets, confirm_seconds=3600)
    engine, runner = app.extensions["prxai_explorer"], app.extensions["prxai_explorer_jobs"]
    mine, other = _session_client(app, 1), _session_client(app, 2)
    body = {"text": "the story was not good", "method": "pr-a", "top_edges": 4, "nodes": 4}
    engine.max_method_seconds = 1e-9
    resp = mine.post("/api/graph", json=body)
    assert resp.status_code == 422 and resp.json["error"].startswith("PR-A graph would take about"), resp.json
    engine.max_method_seconds, engine.confirm_seconds = 300.0, 0.0
    resp = mine.post("/api/graph", json=body)
    assert resp.status_code == 409 and resp.json["needs_confirmation"] is True
    assert runner.queued() == {} and len(runner._jobs) == 0  # nothing was submitted or computed
    engine.confirm_seconds = 3600.0

    blocker = other.post("/api/explain", json={"text": "a good film", "methods": ["explorer-test-slow-fast"]}).json
    assert slow_fast_method["started"].wait(30)
    resp = mine.post("/api/graph", json=body)
    assert resp.status_code == 202 and resp.json["kind"] == "graph" and resp.json["status"] == "queued"
    job = resp.json
    assert runner.queued() == {"fast": 1}  # waits behind the one-pass lane's job
    assert other.get(f"/api/jobs/{job['id']}").status_code == 404
    assert other.post(f"/api/jobs/{job['id']}/cancel").status_code == 404
    assert mine.get(f"/api/jobs/{job['id']}").json["status"] == "queued"  # untouched
    runner._active_per_owner = 1  # this client's quota is its one queued graph job
    resp = mine.post("/api/graph", json=dict(body, nodes=3))
    assert resp.status_code == 429 and "jobs running or queued" in resp.json["error"]
    runner._active_per_owner = 8
    final = wait(mine, mine.post(f"/api/jobs/{job['id']}/cancel").json)
    assert final["status"] == "cancelled" and final["graph"] is None
    assert final["errors"] == [{"method": "pr-a", "error": "cancelled"}]
    slow_fast_method["release"].set()
    assert wait(other, blocker)["status"] == "done"
    assert engine.stats()["graphs_cached"] == 0  # the cancelled graph was never drawn

    drawn = draw_graph(mine, **body)  # now it runs, and the drawing is cached: the same request is done at once
    assert drawn["cached"] is False and drawn["nodes"] and drawn["svg"].startswith("<svg")
    again = mine.post("/api/graph", json=body)
    assert again.status_code == 200 and again.json["graph"]["cached"] is True
    assert again.json["graph"]["svg"] == drawn["svg"]


def test_an_exports_graph_is_a_job_cancelled_when_the_client_leaves(tiny, slow_fast_method):
    """Item 1, the graph inside an export: it runs as a graph job of the client (its limits first), and when the
    client leaves while it waits, it is cancelled and never drawn."""
    import json as json_
    import socket as socket_

    from captum_prxai.explorer import ServerThread

    model, tokenizer, datasets = tiny
    app = create_app(model, tokenizer, datasets, confirm_seconds=3600)
    engine, runner = app.extensions["prxai_explorer"], app.extensions["prxai_explorer_jobs"]
    client = _session_client(app, 1)
    done = explain(client, text="a good film", methods=["pr-a"])
    engine.max_method_seconds = 1e-9
    resp = client.post("/api/export", json={"job": done["id"], "graph": "pr-ag"})
    assert resp.status_code == 422 and resp.json["error"].startswith("PR-AG graph would take about"), resp.json
    engine.max_method_seconds = 300.0
    resp = client.post("/api/export", json={"job": done["id"], "graph": {"method": "pr-ag", "walk": "negative"}})
    assert resp.status_code == 400 and "has no negative walk to draw" in resp.json["error"]
    with ServerThread(app, port=0) as server:
        blocker = client.post("/api/explain", json={"text": "a bad film", "methods": ["explorer-test-slow-fast"]}).json
        assert slow_fast_method["started"].wait(30)
        body = json_.dumps({"job": done["id"], "graph": "pr-ag"}).encode()
        sock = socket_.create_connection(("127.0.0.1", server.port), timeout=30)
        sock.sendall(b"POST /api/export HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"X-PRXAI-Session: " + f"{1:032x}".encode() + b"\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        deadline = time.monotonic() + 30
        while not [j for j in list(runner._jobs.values()) if j.payload["kind"] == "graph"]:
            assert time.monotonic() < deadline, "the export submitted no graph job"
            time.sleep(0.02)
        graph_job = next(j for j in list(runner._jobs.values()) if j.payload["kind"] == "graph")
        assert graph_job.owner == f"{1:032x}" and graph_job.status == "queued" and runner.queued() == {"fast": 1}
        sock.close()  # the client leaves
        assert graph_job.finished_event.wait(30), "the export's graph job still waits after its client left"
        assert graph_job.status == "cancelled" and graph_job.errors == {"pr-ag": "cancelled"}
    slow_fast_method["release"].set()
    assert wait(client, blocker)["status"] == "done"
    assert engine.stats()["graphs_cached"] == 0  # never drawn
    page = client.post("/api/export", json={"job": done["id"], "graph": "pr-ag"}).get_data(as_text=True)
    assert "PR-AG graph</h2>" in page and "<svg" in page  # with the client there, the export has its graph


def test_an_explorer_made_during_a_capture_on_the_model_keeps_its_attention_setting(tiny):
    """A capture running on the model in another thread (another explorer's attention flow, or a user's attribution)
    switches the model's attention implementation while it runs; the new explorer's copies are made after it, with
    the model's own setting, and none of its hooks."""
    import threading

    from captum_prxai.hooks import CAPTURE_IMPLEMENTATION, AttentionRecorder, attention_layers

    model, tokenizer, datasets = tiny
    rest = model.config._attn_implementation
    assert rest != CAPTURE_IMPLEMENTATION
    capturing, release, made = threading.Event(), threading.Event(), {}

    def capture():
        recorder = AttentionRecorder(attention_layers(model), reduce=lambda a: a.mean(1), with_gradients=True,
                                     capture="recompute")
        with recorder:
            capturing.set()
            release.wait(60)

    def make():
        made["app"] = create_app(model, tokenizer, datasets, model_name="tiny")

    capturer = threading.Thread(target=capture)
    capturer.start()
    try:
        assert capturing.wait(30)
        assert model.config._attn_implementation == CAPTURE_IMPLEMENTATION  # switched while the capture runs
        maker = threading.Thread(target=make)
        maker.start()
        time.sleep(0.5)  # the explorer is being made meanwhile
    finally:
        release.set()
        capturer.join(30)
    maker.join(60)
    engine = made["app"].extensions["prxai_explorer"]
    assert model.config._attn_implementation == rest
    for lane in ("fast", "predict"):
        replica = engine.lanes[lane].model
        assert replica is not model and replica.config._attn_implementation == rest, lane
        assert not any(layer._forward_hooks or layer._forward_pre_hooks for layer in attention_layers(replica))
    job = explain(made["app"].test_client(), text="the plot was dull", methods=["pr-ag"])
    enc = tokenizer("the plot was dull", return_tensors="pt")
    expected = build_method("pr-ag", model, make_forward_func(model))(
        enc["input_ids"], enc["attention_mask"], None, torch.tensor([job["input"]["target"]]))[0]
    assert job["results"][0]["scores"] == pytest.approx(expected.tolist(), abs=1e-6)


def test_many_pass_methods_run_on_the_slow_lane():
    """IG, attention flow and generalized attention flow (an iterative max-flow per example) share the slow lane."""
    from captum_prxai.explorer.engine import Engine

    assert [Engine.lane_of(name, "attention") for name in ("attention-flow", "gaf", "rollout")] == ["slow", "slow",
                                                                                                   "fast"]
    assert Engine.lane_of("ig", "gradient") == "slow" and Engine.lane_of("lime", "perturbation") == "slow"
