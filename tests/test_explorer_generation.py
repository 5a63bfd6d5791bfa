"""API tests of the explorer's generation view (captum_prxai.explorer.generation) with Flask's test client.

A tiny random Llama causal LM and a word-level tokenizer (tests/conftest.py's tiny_causal_lm and word_tokenizer);
the scores the endpoint returns are checked against LLMGraphAttribution called directly, as the CLI calls it.
"""

from __future__ import annotations

import threading
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("flask")

from captum.attr import TextTokenInput  # noqa: E402

import captum_prxai as cp  # noqa: E402
from captum_prxai import cli  # noqa: E402
from captum_prxai.exceptions import PRXAIError  # noqa: E402
from captum_prxai.explorer import create_generation_app  # noqa: E402
from captum_prxai.explorer.generation import DEFAULT_NEW_TOKENS, generation_methods  # noqa: E402
from captum_prxai.llm import LLMGraphAttribution  # noqa: E402
from captum_prxai.viz.generation_html import VIEW_SCRIPT, generation_html, generation_view, generation_view_html  # noqa: E402,E501

from conftest import poll_job, tiny_causal_lm, word_tokenizer  # noqa: E402

WORDS = ["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(36)]
PROMPT, TARGET = "w1 w2 w3 w4", "w5 w6 w7"
#: the wrapped classes, as the CLI builds them (captum_prxai/commands/explain_generation.py)
CLASSES = {"pr-xai": cp.PageRankAttribution, "pr-a": cp.PRAttention, "pr-g": cp.PRGradient,
           "pr-ag": cp.PRAttentionGradient, "rollout": cp.AttentionRollout}


@pytest.fixture(scope="module")
def lm():
    return tiny_causal_lm(len(WORDS)), word_tokenizer(WORDS, bos=False)  # adds no BOS, as SmolLM2's


@pytest.fixture(scope="module")
def app(lm):
    model, tokenizer = lm
    return create_generation_app(model, tokenizer, model_name="tiny-llama", max_chars=80, max_new_tokens=8)


@pytest.fixture
def client(app):
    return app.test_client()


def wait(client, job, timeout=120.0):
    """Poll a generation job until it is done or cancelled."""
    return poll_job(client, job, "/api/generation/jobs", timeout)


def explain(client, **body):
    resp = client.post("/api/generation/explain", json=body)
    assert resp.status_code in (200, 202), resp.json
    return wait(client, resp.json)


def direct(lm, method, target=TARGET, gen_args=None, prompt=PROMPT):
    """LLMGraphAttribution called directly, on the method built as the CLI builds it."""
    model, tokenizer = lm
    llm = LLMGraphAttribution(CLASSES[method](model, cp.attention_layers(model)), tokenizer)
    return llm.attribute(TextTokenInput(prompt, tokenizer), target=target, gen_args=gen_args)


@pytest.mark.parametrize("method", ["pr-g", "pr-a", "rollout", None])
def test_endpoint_scores_equal_llm_graph_attribution(client, lm, method):
    body = {"prompt": PROMPT, "target": TARGET}
    if method is not None:
        body["method"] = method
    job = explain(client, **body)
    assert job["status"] == "done" and job["error"] is None, job
    result = job["result"]
    expected = direct(lm, method or "pr-xai")  # None: the project's default, PageRankAttribution's own
    assert result["method"] == (method or cp.methods.default_method())
    assert result["input_tokens"] == list(expected.input_tokens) == ["w1", "w2", "w3", "w4"]
    assert result["output_tokens"] == list(expected.output_tokens) == ["w5", "w6", "w7"]
    got = torch.tensor(result["token_attr"])
    assert got.shape == (3, 4) and got.abs().sum() > 0
    assert torch.allclose(got, expected.token_attr.float(), atol=1e-6)
    assert torch.allclose(torch.tensor(result["output_probs"]), expected.output_probs.float(), atol=1e-6)
    # the view's markup is generation_html's own, from these scores
    view = generation_view(expected.input_tokens, expected.output_tokens, expected.token_attr,
                           method=method or "pr-xai")
    assert result["html"] == generation_view_html(view)
    assert result["html"].count('<tr class="row"') == 3 and "<script>" not in result["html"]


def test_greedy_generation_without_a_target(client, lm):
    job = explain(client, prompt=PROMPT, max_new_tokens=4, method="pr-ag")
    assert job["status"] == "done" and job["error"] is None, job
    expected = direct(lm, "pr-ag", target=None, gen_args={"max_new_tokens": 4, "do_sample": False})
    result = job["result"]
    assert result["output_tokens"] == list(expected.output_tokens) and 1 <= len(result["output_tokens"]) <= 4
    assert torch.allclose(torch.tensor(result["token_attr"]), expected.token_attr.float(), atol=1e-6)
    assert job["calls"] >= len(result["output_tokens"]) + 1  # the progress counted each generation step and the pass
    assert job["request"]["target"] is None and job["request"]["max_new_tokens"] == 4


def test_default_request_and_info(client):
    info = client.get("/api/generation/info").json
    names = [m["name"] for m in info["methods"]]
    assert info["default_method"] == cp.methods.default_method() == names[0]
    assert names == [s.name for s in generation_methods()]
    assert {"pr-a", "pr-g", "pr-ag", "rollout"} <= set(names) and "ig" not in names and "attention-flow" not in names
    default = min(DEFAULT_NEW_TOKENS, 8)  # this app's max_new_tokens is 8
    assert info["limits"] == {"max_chars": 80, "max_new_tokens": 8, "default_new_tokens": default}
    resp = client.post("/api/generation/explain", json={"prompt": PROMPT})
    assert resp.json["request"] == {"prompt": PROMPT, "target": None, "max_new_tokens": default,
                                    "method": info["default_method"], "chat": False}
    assert info["chat"] is False  # this tokenizer has no chat template
    assert wait(client, resp.json)["status"] == "done"


def test_export_is_the_standalone_view_of_the_result(client, lm):
    job = explain(client, prompt=PROMPT, target=TARGET, method="pr-g")
    resp = client.post("/api/generation/export", json={"job": job["id"]})
    assert resp.status_code == 200 and "attachment" in resp.headers["Content-Disposition"]
    expected = direct(lm, "pr-g")
    page = generation_html(expected.input_tokens, expected.output_tokens, expected.token_attr, method="pr-g",
                           model_name="tiny-llama")
    assert resp.get_data(as_text=True) == page


def test_page_serves_the_view_script_and_no_inline_script(client):
    page = client.get("/")
    assert page.status_code == 200 and 'src="/static/generation.js"' in page.get_data(as_text=True)
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert "<script>" not in page.get_data(as_text=True)
    script = client.get("/static/generation-view.js")
    assert script.status_code == 200 and script.get_data(as_text=True) == VIEW_SCRIPT
    for name in ("generation.js", "generation.css", "style.css", "generation-view.css"):
        assert client.get(f"/static/{name}").status_code == 200, name
    assert client.get("/static/app.js").status_code == 404  # the classifier page's script is not served here
    assert client.get("/static/../generation.py").status_code == 404


@pytest.mark.parametrize("body, status, words", [
    ({"prompt": ""}, 400, "prompt is empty"),
    ({"prompt": "   \n"}, 400, "prompt is empty"),
    ({}, 400, "'prompt' must be"),
    ({"prompt": PROMPT, "target": "  "}, 400, "target is empty"),
    ({"prompt": PROMPT, "target": 3}, 400, "'target' must be"),
    ({"prompt": PROMPT, "max_new_tokens": 0}, 400, "from 1 to 8"),
    ({"prompt": PROMPT, "max_new_tokens": 9}, 400, "from 1 to 8"),
    ({"prompt": PROMPT, "max_new_tokens": True}, 400, "from 1 to 8"),
    ({"prompt": PROMPT, "method": "ig"}, 400, "not an attention-graph method"),
    ({"prompt": PROMPT, "method": "no-such-method"}, 400, "no-such-method"),
    ({"prompt": "w1 " * 30}, 413, "at most 80"),
    ({"prompt": PROMPT, "chat": "yes"}, 400, "'chat' must be true or false"),
])
def test_bad_requests_are_refused_with_a_message(client, body, status, words):
    resp = client.post("/api/generation/explain", json=body)
    assert resp.status_code == status, resp.json
    assert words in resp.json["error"] and "Traceback" not in resp.json["error"]


def test_a_target_of_special_tokens_only_shows_the_librarys_message(client, lm):
    with pytest.raises(PRXAIError) as refused:
        direct(lm, "pr-a", target="</s> <s>")
    job = explain(client, prompt=PROMPT, target="</s> <s>", method="pr-a")
    assert job["status"] == "done" and job["result"] is None
    assert job["error"] == str(refused.value) and "only special tokens" in job["error"]


def test_a_chat_prompt_equals_llm_graph_attribution_on_chat_input(lm):
    """``"chat": true`` wraps the prompt as a user message (captum_prxai.llm.chat_input, as explain-generation
    --chat); without a chat template the library's refusal is the job's error."""
    from captum_prxai.llm import chat_input

    model, plain = lm
    words = WORDS + ["<|im_start|>", "<|im_end|>", "user", "assistant"]
    template = ("{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> {% endfor %}"
                "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}")
    tokenizer = word_tokenizer(words, bos=False, chat_template=template, specials=("<|im_start|>", "<|im_end|>"))
    chat_model = tiny_causal_lm(len(words))
    client = create_generation_app(chat_model, tokenizer).test_client()
    assert client.get("/api/generation/info").json["chat"] is True
    job = explain(client, prompt=PROMPT, target=TARGET, method="pr-g", chat=True)
    assert job["status"] == "done" and job["error"] is None, job
    expected = LLMGraphAttribution(cp.PRGradient(chat_model, cp.attention_layers(chat_model)), tokenizer).attribute(
        chat_input([{"role": "user", "content": PROMPT}], tokenizer), target=TARGET)
    assert job["result"]["input_tokens"] == list(expected.input_tokens)
    assert not any("im_start" in t for t in job["result"]["input_tokens"])  # the template's tokens get no column
    assert torch.allclose(torch.tensor(job["result"]["token_attr"]), expected.token_attr.float(), atol=1e-6)
    with pytest.raises(PRXAIError) as refused:
        chat_input([{"role": "user", "content": PROMPT}], plain)
    plain_job = explain(create_generation_app(model, plain).test_client(), prompt=PROMPT, chat=True)
    assert plain_job["result"] is None and plain_job["error"] == str(refused.value)


def test_a_model_that_is_not_a_causal_lm_is_refused_with_the_librarys_message(tiny_model_factory):
    classifier = tiny_model_factory("llama")  # LlamaForSequenceClassification
    with pytest.raises(PRXAIError, match="not a causal language model"):
        create_generation_app(classifier, word_tokenizer(WORDS))


def test_a_model_without_causal_attention_shows_the_librarys_message_in_the_job():
    """A language-model head on a bidirectional encoder passes the class check; the library finds its attention
    is not causal during the pass, and the page gets that message as the job's error."""
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=64, is_decoder=False,
                                     attn_implementation="eager")
    model, tokenizer = transformers.BertLMHeadModel(config).eval(), word_tokenizer(WORDS, bos=False)
    with pytest.raises(PRXAIError) as refused:
        LLMGraphAttribution(cp.PRAttention(model, cp.attention_layers(model)), tokenizer).attribute(
            TextTokenInput(PROMPT, tokenizer), target=TARGET)
    client = create_generation_app(model, tokenizer).test_client()
    job = explain(client, prompt=PROMPT, target=TARGET, method="pr-a")
    assert job["status"] == "done" and job["result"] is None
    assert job["error"] == str(refused.value) and "not causal" in job["error"]


def test_explore_decoder_prints_the_error_without_a_traceback(tiny_model_factory, monkeypatch, capsys):
    from captum_prxai.models import decoder

    monkeypatch.setattr(decoder, "load_decoder", lambda name: (tiny_model_factory("gpt2"), word_tokenizer(WORDS)))
    assert cli.main(["explore", "--decoder", "tiny", "--no-browser", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "not a causal language model" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert cli.main(["explore", "--decoder", "tiny", "--model", "default"]) == 2
    assert "--decoder opens the generation view alone" in capsys.readouterr().err


def test_jobs_belong_to_their_session(app, lm):
    mine, other = app.test_client(), app.test_client()
    headers = {"X-PRXAI-Session": "a" * 32}
    resp = mine.post("/api/generation/explain", json={"prompt": PROMPT, "target": TARGET}, headers=headers)
    job_id = resp.json["id"]
    assert other.get(f"/api/generation/jobs/{job_id}", headers={"X-PRXAI-Session": "b" * 32}).status_code == 404
    assert other.post(f"/api/generation/jobs/{job_id}/cancel", json={},
                      headers={"X-PRXAI-Session": "b" * 32}).status_code == 404
    assert mine.get("/api/generation/jobs/not-an-id", headers=headers).status_code == 404
    deadline = time.monotonic() + 120
    while mine.get(f"/api/generation/jobs/{job_id}", headers=headers).json["status"] != "done":
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_cancel_stops_the_pass_at_the_next_model_call(app, lm):
    """A pass held at its first model call is cancelled: the job ends cancelled, the model keeps no hook, and the
    next request runs normally."""
    model, _ = lm
    client = app.test_client()
    entered, release = threading.Event(), threading.Event()

    def hold(module, args):  # registered before the pass's own guard, so it runs first
        if not entered.is_set():
            entered.set()
            release.wait(60)

    handle = model.register_forward_pre_hook(hold)
    try:
        resp = client.post("/api/generation/explain", json={"prompt": PROMPT, "max_new_tokens": 6, "method": "pr-g"})
        assert resp.status_code == 202
        assert entered.wait(60)
        running = client.get(f"/api/generation/jobs/{resp.json['id']}").json
        assert running["status"] == "running" and running["running"] == ["pr-g"]
        cancelled = client.post(f"/api/generation/jobs/{resp.json['id']}/cancel", json={}).json
        assert cancelled["cancelled"] is True
        release.set()
        job = wait(client, cancelled)
    finally:
        release.set()
        handle.remove()
    assert job["status"] == "cancelled" and job["result"] is None and job["error"] == "cancelled"
    assert job["calls"] == 0  # stopped at the first call: nothing generated
    assert len(model._forward_pre_hooks) == 0  # the pass's guard is removed
    after = explain(client, prompt=PROMPT, target=TARGET, method="pr-g")
    assert torch.allclose(torch.tensor(after["result"]["token_attr"]), direct(lm, "pr-g").token_attr.float(),
                          atol=1e-6)


def test_explore_decoder_serves_the_generation_view_on_loopback(lm, monkeypatch, capsys):
    import webbrowser

    from captum_prxai import explorer
    from captum_prxai.models import decoder

    served, loaded = [], []

    class FakeServer:
        server_port = 8799

        def serve_forever(self):
            raise KeyboardInterrupt

        def server_close(self):
            served.append("closed")

    monkeypatch.setattr(decoder, "load_decoder", lambda name: loaded.append(name) or lm)
    monkeypatch.setattr(explorer, "make_server", lambda app, host, port: served.append((app, host, port)) or FakeServer())
    monkeypatch.setattr(webbrowser, "open", lambda url: served.append(url))
    assert cli.main(["explore", "--decoder", "smollm2", "--port", "8799", "--max-chars", "50"]) == 0
    assert loaded == ["smollm2"] and "PR-XAI explorer: http://127.0.0.1:8799/" in capsys.readouterr().out
    app, host, port = served[0]
    assert (host, port) == ("127.0.0.1", 8799) and served[1:] == ["http://127.0.0.1:8799/", "closed"]
    client = app.test_client()
    info = client.get("/api/generation/info").json
    assert info["model"] == "smollm2" and info["limits"]["max_chars"] == 50
    assert client.get("/api/generation/info", headers={"Host": "evil.example"}).status_code == 403
    assert client.post("/api/generation/explain", json={"prompt": PROMPT},
                       headers={"Origin": "http://evil.example"}).status_code == 403
