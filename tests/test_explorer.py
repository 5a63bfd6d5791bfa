"""API tests of the explorer (captum_prxai.explorer) with Flask's test client, on a tiny BERT built from a config."""

from __future__ import annotations

import time

import pytest

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


@pytest.fixture
def app(tiny):
    model, tokenizer, datasets = tiny
    return create_app(model, tokenizer, datasets, model_name="tiny", max_chars=120)


@pytest.fixture
def client(app):
    return app.test_client()


def wait(client, job, timeout=60.0):
    """Poll a job until it is done."""
    deadline = time.monotonic() + timeout
    while job["status"] != "done":
        assert time.monotonic() < deadline, f"job not done after {timeout} s: {job}"
        time.sleep(0.05)
        resp = client.get(f"/api/jobs/{job['id']}")
        assert resp.status_code == 200, resp.json
        job = resp.json
    return job


def explain(client, **body):
    resp = client.post("/api/explain", json=body)
    assert resp.status_code in (200, 202), resp.json
    return wait(client, resp.json)


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
    assert by_name["pr-ag"]["params"] == ["damping", "teleport", "graph", "head_reduction"]
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
    resp = client.post("/api/graph", json={"text": text, "method": method, "params": params, "top_edges": 5,
                                           "nodes": 5})
    assert resp.status_code == 200, resp.json
    out = resp.json
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
    out = client.post("/api/graph", json={"text": "a good film", "method": "pr-ag",
                                          "params": {"graph": "layered"}, "nodes": 200}).json
    assert out["graph"] == "layered"
    assert "layered graph (3 x 5 nodes)" in out["title"]  # (L + 1) x T nodes, 2 layers, 5 tokens
    assert max(out["nodes"]) >= 5 and len(out["nodes"]) == 15


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
    assert main(["explore", "--host", "0.0.0.0", "--port", "8799", "--no-browser"]) == 0
    assert "warning: listening on 0.0.0.0" in capsys.readouterr().out
    assert served[0][0].test_client().get("/api/info", headers={"Host": "lab:8799"}).status_code == 200
    assert len(opened) == 1  # --no-browser
