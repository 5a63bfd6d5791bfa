"""``captum-prxai explain-generation`` and its standalone HTML view (captum_prxai.viz.generation_html).

The packaged SmolLM2 loader is replaced by a tiny random Llama causal LM and a word-level tokenizer with a chat
template (tests/conftest.py's tiny_causal_lm and word_tokenizer).
"""

from __future__ import annotations

import json
import re

import pytest
import torch

transformers = pytest.importorskip("transformers")

from captum_prxai import cli  # noqa: E402
from captum_prxai.llm import load_result  # noqa: E402
from captum_prxai.viz.generation_html import generation_html  # noqa: E402

from conftest import tiny_causal_lm, word_tokenizer  # noqa: E402

WORDS = ["<pad>", "<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>", "user", "assistant"] + [
    f"w{i}" for i in range(42)]
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> {% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}")


def _tokenizer():
    return word_tokenizer(WORDS, bos=False, chat_template=CHAT_TEMPLATE,  # adds no BOS, as SmolLM2's
                          specials=("<|im_start|>", "<|im_end|>"))


def _llama():
    return tiny_causal_lm(len(WORDS))


@pytest.fixture
def tiny_decoder(monkeypatch):
    from captum_prxai.models import decoder

    loaded = []

    def load(name="smollm2"):
        loaded.append(name)
        return _llama(), _tokenizer()

    monkeypatch.setattr(decoder, "load_decoder", load)
    return loaded


def test_explain_generation_prints_a_row_per_token_and_writes_html_and_json(tiny_decoder, tmp_path, capsys):
    html, saved = tmp_path / "view.html", tmp_path / "result.json"
    code = cli.main(["explain-generation", "w1 w2 w3", "--target", "w4 w5 w6", "--html", str(html),
                     "--save", str(saved), "--method", "pr-g", "--no-color"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and tiny_decoder == ["smollm2"]
    rows = [line for line in out if line.startswith("'")]
    assert [line.split()[0] for line in rows] == ["'w4'", "'w5'", "'w6'"]
    assert all("w1" in line and "w3" in line for line in rows)
    assert out[-1].startswith("scale:")
    result = load_result(saved)
    assert result.input_tokens == ["w1", "w2", "w3"] and result.output_tokens == ["w4", "w5", "w6"]
    assert result.model_name == "smollm2" and result.method.startswith("PRGradient(")
    assert (result.token_attr[:, 0] > 0).all()  # the BOS put in front keeps the first word's score
    page = html.read_text(encoding="utf-8")
    assert page.count('<tr class="row"') == 3 and "<script>" in page
    assert not re.search(r"(src|href)=\"?https?:", page)  # standalone: no external assets


def test_explain_generation_generates_without_a_target_and_takes_chat_prompts(tiny_decoder, capsys):
    assert cli.main(["explain-generation", "w1 w2 w3", "--max-new-tokens", "2", "--no-color"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("'")]
    assert 1 <= len(rows) <= 2
    assert cli.main(["explain-generation", "w1 w2", "--chat", "--target", "w9", "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "im_start" not in out and "w1" in out  # the template's tokens get no column


@pytest.mark.parametrize("argv, message", [
    (["   "], "The prompt is empty"),
    (["w1 w2", "--target", "</s>"], "only special tokens"),
    (["w1 w2", "--max-new-tokens", "0"], "--max-new-tokens must be at least 1"),
    (["w1 w2", "--html", "/nonexistent-folder/x.html"], "does not exist"),
    (["w1 w2", "--save", "out.txt"], "give a .json file name"),
])
def test_explain_generation_bad_input_is_one_line(tiny_decoder, capsys, argv, message):
    code = cli.main(["explain-generation", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    errors = [line for line in err if "error:" in line]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in "\n".join(err)


def test_generation_html_colours_each_row_and_hands_the_script_the_same_colours():
    page = generation_html(["a", "<b>", "c"], ["x", "y"], torch.tensor([[0.5, 0.25, 0.0], [0.0, 0.0, 1.0]]),
                           method="pr-a", model_name="m")
    assert "&lt;b&gt;" in page and "<b>" not in page.split("<body>")[1].split("<script")[0]
    data = json.loads(re.search(r'<script type="application/json" id="prxai-data">(.*?)</script>', page).group(1))
    cells = re.findall(r'<tr class="row" tabindex="0" data-row="(\d)">(.*?)</tr>', page)
    assert len(cells) == 2
    for k, row in cells:
        backgrounds = re.findall(r"background:(rgb\([^)]*\))", row)
        assert backgrounds == data["colors"][int(k)]
    # the row's largest score gets the full colour, a zero score stays white
    assert data["colors"][1][2] != "rgb(255,255,255)" and data["colors"][1][0] == "rgb(255,255,255)"
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        generation_html(["a", "b", "c"], ["x", "y"], [[1.0, 2.0]])
