"""benchmarks/generation.py: the teacher-forced deletion metric, its cached forwards, the prompts, the
paired table and the resumable cache, on a tiny random Llama causal LM and a word-level tokenizer."""

from __future__ import annotations

import math
import re

import pytest
import torch

WORDS = ["<pad>", "<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>", "system", "user", "assistant", "\n"] + [
    f"w{i}" for i in range(30)]


def _tokenizer():
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                               pad_token="<pad>", unk_token="<unk>",
                                               additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    tok.chat_template = ("{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> "
                         "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}")
    return tok


def _lm():
    import transformers as tf

    torch.manual_seed(0)
    config = tf.LlamaConfig(vocab_size=len(WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                            num_key_value_heads=1, intermediate_size=32, max_position_embeddings=64,
                            pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return tf.LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def gen(benchmark_script):
    return benchmark_script("generation.py")


@pytest.fixture(scope="module")
def tok():
    return _tokenizer()


@pytest.fixture(scope="module")
def lm():
    return _lm()


def _by_hand_probs(model, variant, target):
    """p(t_k | variant, t_<k) for every k from one plain forward, read position by position."""
    ids = torch.tensor([list(variant) + target[:-1].tolist()])
    with torch.no_grad():
        probs = torch.softmax(model(ids).logits[0], dim=-1)
    return torch.stack([probs[len(variant) - 1 + k, t] for k, t in enumerate(target.tolist())])


def test_metric_by_hand_on_a_toy_case(gen):
    prompt = torch.tensor([1, 10, 11, 12, 13])  # BOS, then four removable tokens
    protected = torch.tensor([True, False, False, False, False])
    seen = []

    def probs(variants):  # output 0 leans on 10 and 12, output 1 on 13
        seen.extend(variants)
        return torch.tensor([[0.1 + 0.2 * (10 in v) + 0.1 * (12 in v), 0.05 + 0.4 * (13 in v)] for v in variants])

    scores = torch.tensor([[0.0, 5.0, -1.0, 3.0, 2.0],   # row 0: 10 > 12 > 13 > 11 (negative)
                           [0.0, 0.0, 1.0, 2.0, 9.0]])   # row 1: 13 > 12 > 11 > 10 (zero)
    out = gen.faithfulness(probs, prompt, protected, scores, bins=(0.25, 0.5))  # 1 and 2 of 4 tokens
    # full: p0 = 0.4, p1 = 0.45. Comp. row 0: drop 10 -> 0.2 (0.2), drop 10, 12 -> 0.1 (0.3); row 1: 0.4, 0.4.
    assert out["comp_rows"] == pytest.approx([0.25, 0.4])
    assert out["comp_bins"] == pytest.approx([0.3, 0.35])
    assert out["comprehensiveness"] == pytest.approx(0.325)
    # Suff. row 0: keep 10 -> 0.3 (0.1), keep 10, 12 -> 0.4 (0); row 1: keep 13 -> 0.45 (0), keep 13, 12 (0).
    assert out["suff_rows"] == pytest.approx([0.05, 0.0])
    assert out["sufficiency"] == pytest.approx(0.025)
    # bottom 20% of 4 tokens is one token: row 0's is 11 (-1, negative), row 1's is 10 (0, not negative)
    assert out["negative_bottom"] == pytest.approx(0.5)
    assert all(v[0] == 1 for v in seen)  # BOS is never deleted
    assert (1, 11, 12, 13) in seen and (1, 10) in seen and (1, 12, 13) in seen


def test_target_probs_equal_plain_forwards(gen, lm):
    torch.manual_seed(1)
    prompt = torch.randint(4, len(WORDS), (9,))
    target = torch.randint(4, len(WORDS), (4,))
    variants = [tuple(prompt.tolist()), tuple(prompt[1:].tolist()), tuple(prompt[[0, 1, 2, 5, 8]].tolist()),
                tuple(prompt[[0, 1, 2, 3, 6]].tolist()), tuple(prompt[[4]].tolist())]
    expected = torch.stack([_by_hand_probs(lm, v, target) for v in variants])
    cached = gen.TargetProbs(lm, target, prompt)
    plain = gen.TargetProbs(lm, target)
    assert torch.allclose(cached(variants), expected, atol=1e-5)
    assert torch.allclose(plain(variants), expected, atol=1e-5)
    before = cached.forwards
    cached(variants)  # memoised: nothing runs again
    assert cached.forwards == before


def test_prompts_protect_bos_and_the_chat_template(gen, tok):
    plain = gen.tokenize_prompt(tok, "cloze", "tune", 0, gen.Source("w1 w2 w3", "w3"))
    assert plain.text == "<s>w1 w2 w3"
    assert tok.convert_ids_to_tokens(plain.ids.tolist()) == ["<s>", "w1", "w2", "w3"]
    assert plain.protected.tolist() == [True, False, False, False]
    chat = gen.tokenize_prompt(tok, "chat", "tune", 0, gen.Source("w4 w5"))
    tokens = tok.convert_ids_to_tokens(chat.ids.tolist())
    assert [t for t, p in zip(tokens, chat.protected.tolist()) if not p] == ["w4", "w5"]
    assert "assistant" in tokens and "<|im_start|>" in tokens


def test_sources_and_halves(gen):
    cloze = gen.cloze_sources()
    assert len(cloze) >= 150 and len({s.text for s in cloze}) == len(cloze)
    assert gen.Source("The capital of France is", "Paris") in cloze
    tune, holdout = gen.source_half(cloze, "cloze", "tune"), gen.source_half(cloze, "cloze", "holdout")
    assert len(tune) + len(holdout) == len(cloze) and not {s.text for s in tune} & {s.text for s in holdout}
    assert gen._first_sentence("a b . c d . e") == "a b ."
    assert gen._first_sentence("One two. Three") == "One two."


def _records(gen, values):
    """Cache records of one cell: ``{method: [(comp, suff), ...]}`` on prompts 0, 1, 2."""
    out = []
    for method, pairs in values.items():
        for example, (comp, suff) in enumerate(pairs):
            out.append({"model": "m", "source": "cloze", "half": "tune", "example": example, "method": method,
                        "comprehensiveness": comp, "sufficiency": suff, "negative_bottom": 0.0, "cpu_s": 1.0,
                        **({"spec": {"walks": "positive"}} if method == gen.DEFAULT else {})})
    return out


def test_table_pairs_methods_on_the_same_prompts(gen, tmp_path):
    records = _records(gen, {"pr-xai": [(0.5, 0.1), (0.7, 0.2), (0.9, 0.3)],
                             "lig": [(0.4, 0.1), (0.5, 0.1), (0.6, 0.1)]})
    text = gen.write_table(records, tmp_path / "summary.md", "python benchmarks/generation.py --n 3").read_text()
    assert "python benchmarks/generation.py --n 3" in text.splitlines()[3]
    # paired: comp. differences 0.1, 0.2, 0.3 -> +0.200 ± 0.1/sqrt(3); suff. 0, 0.1, 0.2 -> +0.100 ± 0.058
    sem = 0.1 / math.sqrt(3)
    row = next(line for line in text.splitlines() if line.startswith("| Captum LIG | 3 | +0.200"))
    assert f"+0.200 ± {sem:.3f}" in row and f"+0.100 ± {sem:.3f}" in row
    assert "ahead / behind" in row  # comp. ahead by 2 s.e., suff. worse by more than one s.e.
    assert re.search(r"\| m \| cloze \| tune \| Captum LIG \| 3 \|", text)  # the overview of the Captum rivals
    # unpaired means with their own standard errors
    assert "| PR-XAI default | 3 | 0.700 ± 0.115 | 0.200 ± 0.058 |" in text


def test_run_resumes_from_the_cache_and_writes_the_table(gen, tok, lm, tmp_path):
    items = {"cloze": [gen.Source(f"w{i} w{i + 1} w{i + 2}") for i in range(6)],
             "chat": [gen.Source(f"w{i} w{i + 3}") for i in range(6)]}
    prompts = gen.load_prompts(tok, ["cloze", "chat"], ["tune"], 2, items)
    assert [len(p) for p in prompts.values()] == [2, 2]
    logged = []
    first = gen.run("tiny", lm, tok, prompts, ["pr-a", "random"], tmp_path, log=logged.append)
    assert first == {"computed": 8, "cached": 0} and len(logged) == 8
    from captum_prxai.bench.cache import RecordCache

    records = list(RecordCache(tmp_path / "cache.jsonl").read().values())
    targets = [r for r in records if r["method"] == gen.TARGET]
    assert len(targets) == 4 and all(len(r["target"]) == gen.N_OUT for r in targets)
    scored = [r for r in records if r["method"] != gen.TARGET]
    assert all(len(r["comp_bins"]) == 5 and math.isfinite(r["comprehensiveness"]) for r in scored)
    again = gen.run("tiny", lm, tok, prompts, ["pr-a", "random"], tmp_path, log=logged.append)
    assert again == {"computed": 0, "cached": 8} and len(logged) == 8
    more = gen.run("tiny", lm, tok, prompts, ["pr-a", "pr-xai"], tmp_path, log=logged.append)
    assert more == {"computed": 4, "cached": 4}  # only the new method, on the same continuations
    assert len([r for r in RecordCache(tmp_path / "cache.jsonl").read().values() if r["method"] == gen.TARGET]) == 4
    assert gen.main(["--table", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "summary.md").read_text()
    assert "## tiny · cloze · tune" in text and "## tiny · chat · tune" in text
    assert "| PR-A | 2 |" in text and "| Random | 2 |" in text


def test_command_line_rejects_unknown_names_in_one_line(gen, tmp_path):
    assert gen._method_list("graph,random") == [*gen.GRAPH_METHODS, "random"]
    for args, word in ((["--methods", "pr-a,nope"], "nope"), (["--models", "gpt9"], "gpt9"),
                       (["--sources", "poems"], "poems"), (["--n", "0"], "positive")):
        with pytest.raises(SystemExit) as caught:
            gen.main(args + ["--out", str(tmp_path)])
        assert word in str(caught.value) and "\n" not in str(caught.value)


def test_the_defaults_records_carry_their_spec_and_former_ones_count_as_the_former_default(gen, tok, lm, tmp_path):
    items = {"cloze": [gen.Source(f"w{i} w{i + 1} w{i + 2}") for i in range(4)]}
    prompts = gen.load_prompts(tok, ["cloze"], ["tune"], 1, items)
    gen.run("tiny", lm, tok, prompts, [gen.DEFAULT], tmp_path, log=lambda _: None)
    from captum_prxai import PageRankAttribution, attention_layers
    from captum_prxai.bench.cache import RecordCache

    (rec,) = [r for r in RecordCache(tmp_path / "cache.jsonl").read().values() if r["method"] == gen.DEFAULT]
    spec = PageRankAttribution(lm, attention_layers(lm)).for_task("generation").spec
    assert rec["spec"]["edge_weight"] == spec.edge_weight and rec["spec"]["walks"] == spec.walks
    assert set(gen.collect([rec])[("tiny", "cloze", "tune")]) == {gen.DEFAULT}
    former = {k: v for k, v in rec.items() if k != "spec"}  # a record made before the generation default
    assert set(gen.collect([former])[("tiny", "cloze", "tune")]) == {gen.FORMER_DEFAULT}
    # the default's cache key names the generation choices, so a former record is never taken for it
    assert gen.method_options(gen.DEFAULT, 8) != {}
