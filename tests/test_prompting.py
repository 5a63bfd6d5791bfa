"""A prompted decoder classifier through the text-level tools: prompt tokens are special, text tokens are scored."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "e2e"))
from _tiny import WORDS  # noqa: E402

import captum_prxai as cp  # noqa: E402
from captum_prxai.models.decoder import LabelWordClassifier  # noqa: E402
from captum_prxai.models.prompting import PromptTokenizer  # noqa: E402


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    import transformers

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "review", ":", "answer", *WORDS]
    vocab_file = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = transformers.BertTokenizerFast(vocab=str(vocab_file), do_lower_case=True, model_max_length=48)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                      num_key_value_heads=1, intermediate_size=32, max_position_embeddings=48,
                                      pad_token_id=0)
    lm = transformers.LlamaForCausalLM(config).eval()
    clf = LabelWordClassifier(lm, tokenizer, ["bad", "good"], "review : {text} answer :").eval()
    return clf, PromptTokenizer(clf)


def test_prompt_tokens_are_special_and_text_tokens_are_not(decoder):
    clf, tok = decoder
    enc = tok("a good film", return_special_tokens_mask=True, return_tensors="pt")
    tokens = tok.convert_ids_to_tokens(enc["input_ids"][0])
    real = [t for t, s in zip(tokens, enc["special_tokens_mask"][0].tolist()) if s == 0]
    assert real == ["a", "good", "film"]
    assert enc["input_ids"].shape == enc["attention_mask"].shape
    # truncation cuts the text, never the prompt
    limit = len(tokens) - 1
    short = tok("a good film and a bad plot", truncation=True, max_length=limit, return_special_tokens_mask=True)
    kept = tok.convert_ids_to_tokens(short["input_ids"])
    assert len(kept) == limit
    assert kept[:3] == tokens[:3] and kept[-3:] == tokens[-3:]  # prompt kept on both sides
    assert [t for t, s in zip(kept, short["special_tokens_mask"]) if s == 0] == ["a", "good"]


def test_decoder_benchmark_scores_only_text_tokens(decoder, tmp_path):
    from captum_prxai.bench.runner import run_benchmark

    clf, tok = decoder
    result = run_benchmark(clf, tok, [("a good film", 1), ("the plot was dull", 0)], "pr-ag,gae,random", n=2,
                           out_dir=tmp_path, progress=False, plot=False, warmup=False)
    assert not result.errors
    assert {r["method"] for r in result.records} == {"pr-ag", "gae", "random"}
    # removing every scored token leaves the bare prompt: the prompt itself is never removed
    for record in result.records:
        text = "a good film" if record["n_tokens"] == 9 else "the plot was dull"
        empty = tok("", return_tensors="pt")
        with torch.no_grad():
            p_empty = torch.softmax(clf(empty["input_ids"], empty["attention_mask"]), -1)[0, record["target"]]
        assert record["curve_most"][-1] == pytest.approx(float(p_empty), abs=1e-5), text
    # PR-XAI on the decoder explains the last token (causal attention, teleport to the last position)
    enc = tok("a good film", return_tensors="pt")
    scores = cp.PRAttentionGradient(clf, cp.attention_layers(clf)).attribute(enc["input_ids"], target=1)
    assert scores.shape == enc["input_ids"].shape and torch.isclose(scores.sum(), torch.tensor(1.0), atol=1e-5)
