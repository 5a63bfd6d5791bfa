"""Shared fixtures: tiny randomly initialised transformers built from configs (no downloads)."""

from __future__ import annotations

import csv

import pytest
import torch

torch.set_num_threads(1)

VOCAB = 50


def _tiny(kind: str):
    import transformers as tf

    common = dict(vocab_size=VOCAB, num_labels=3, pad_token_id=0)
    if kind == "bert":
        cfg = tf.BertConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                            max_position_embeddings=64, **common)
        return tf.BertForSequenceClassification(cfg)
    if kind == "roberta":
        cfg = tf.RobertaConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                               max_position_embeddings=66, vocab_size=VOCAB, num_labels=3, pad_token_id=1)
        return tf.RobertaForSequenceClassification(cfg)
    if kind == "distilbert":
        cfg = tf.DistilBertConfig(dim=16, n_layers=2, n_heads=2, hidden_dim=32, max_position_embeddings=64, **common)
        return tf.DistilBertForSequenceClassification(cfg)
    if kind == "electra":
        cfg = tf.ElectraConfig(embedding_size=16, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=32, max_position_embeddings=64, **common)
        return tf.ElectraForSequenceClassification(cfg)
    if kind == "mpnet":
        cfg = tf.MPNetConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                             max_position_embeddings=66, vocab_size=VOCAB, num_labels=3, pad_token_id=1)
        return tf.MPNetForSequenceClassification(cfg)
    if kind == "gpt2":
        cfg = tf.GPT2Config(n_embd=16, n_layer=2, n_head=2, n_positions=64, **common)
        return tf.GPT2ForSequenceClassification(cfg)
    if kind == "llama":
        cfg = tf.LlamaConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                             intermediate_size=32, max_position_embeddings=64, **common)
        return tf.LlamaForSequenceClassification(cfg)
    raise ValueError(kind)


ARCHITECTURES = ["bert", "roberta", "distilbert", "electra", "mpnet", "gpt2", "llama"]
DECODERS = {"gpt2", "llama"}


@pytest.fixture(scope="session")
def benchmark_script():
    """Load a script of ``benchmarks/`` as a module: ``benchmark_script("ferret/summarize.py")``.

    The module is registered in ``sys.modules`` while it runs (its dataclasses look their module up) and
    removed afterwards, so each call loads the file afresh.
    """
    import importlib.util
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "benchmarks"

    def load(relative: str):
        name = "benchmark_script_" + relative.replace("/", "_").removesuffix(".py")
        spec = importlib.util.spec_from_file_location(name, root / relative)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        finally:
            del sys.modules[name]
        # a script registers the research variants when research_methods is first imported, once per process;
        # the registry is restored after every test module, so register them again (idempotent) for this one
        research = sys.modules.get("research_methods")
        if research is not None:
            research.register_research_methods()
        return module

    return load


#: The words of the benchmark tests' tiny classifiers (``tiny``, ``tiny_decoder``): their toy texts use only these.
BENCH_WORDS = "the a movie film plot was is not very good bad great awful boring fun".split()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The benchmark tests' tiny BERT classifier (eager attention) and a word-level tokenizer of ``BENCH_WORDS``:
    ``(model, tokenizer)``, shared by the library's tests (tests/test_bench.py) and the scripts' (tests/benchmarks/)."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    torch.set_num_threads(1)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + BENCH_WORDS
    folder = tmp_path_factory.mktemp("tok")
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizer(str(folder / "vocab.txt"))
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, num_labels=2)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = BertForSequenceClassification(config).eval()
    return model, tokenizer


@pytest.fixture(scope="module")
def tiny_decoder():
    """A tiny Llama classifier with a word-level tokenizer of ``BENCH_WORDS`` that adds no special tokens."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>"] + BENCH_WORDS + [","])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>",
                                                     unk_token="<unk>")
    config = transformers.LlamaConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=1, intermediate_size=32,
                                      max_position_embeddings=32, num_labels=2, pad_token_id=0)
    torch.manual_seed(0)
    return transformers.LlamaForSequenceClassification(config).eval(), tokenizer


@pytest.fixture(scope="session")
def tiny_model_factory():
    cache: dict[str, torch.nn.Module] = {}

    def make(kind: str) -> torch.nn.Module:
        if kind not in cache:
            torch.manual_seed(0)
            cache[kind] = _tiny(kind).eval()
        return cache[kind]

    return make


def forward_for(model):
    def forward(input_ids, attention_mask=None):
        return model(input_ids, attention_mask=attention_mask).logits

    return forward


@pytest.fixture
def tiny_batch():
    """Two right-padded examples of token ids (ids >= 2 avoid the pad ids 0 and 1)."""
    torch.manual_seed(1)
    ids = torch.randint(2, VOCAB, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0
    ids[1, 6:] = 0
    return ids, mask


def eager_attentions_and_grads(model, ids, mask, target: int):
    """The model's own eager attentions ``A`` per layer (each call), ``dy/dA`` for logit ``target``, and the logits."""
    previous = model.config._attn_implementation
    model.config._attn_implementation = "eager"
    try:
        out = model(ids, attention_mask=mask, output_attentions=True)
        grads = torch.autograd.grad(out.logits[:, target].sum(), out.attentions)
        return [a.detach() for a in out.attentions], list(grads), out.logits.detach()
    finally:
        model.config._attn_implementation = previous


def recorded_attentions_and_grads(model, ids, mask, target: int, capture: str):
    """``{layer: (A, dy/dA)}`` as :class:`captum_prxai.AttentionRecorder` hands them over, and the logits."""
    import captum_prxai as cp

    seen = {}

    def reduce(layer, attention, grad):
        seen[layer] = (attention.clone(), grad.clone())
        return grad.sum(1)

    with cp.AttentionRecorder(cp.attention_layers(model), reduce, with_gradients=True, capture=capture) as rec:
        logits = model(ids, attention_mask=mask).logits
        rec.backward(logits[:, target].sum())
    return seen, logits.detach()


# -- fixtures of the benchmark scripts' tests (tests/benchmarks/) ---------------------------------------
# They live here, not in a tests/benchmarks/conftest.py: two modules named ``conftest`` would make the library
# tests' ``from conftest import ...`` ambiguous when the whole suite runs.
def _write_results(folder, rows, probs=None):
    """A run folder's ``results.csv`` with ``(example, method, comprehensiveness, sufficiency)`` rows, and with
    ``probs`` (``{example: the explained class's probability}``) a ``prob`` column."""
    folder.mkdir(parents=True)
    fields = ["example", "method", "comprehensiveness", "sufficiency"] + (["prob"] if probs is not None else [])
    with (folder / "results.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for example, method, comp, suff in rows:
            row = {"example": example, "method": method, "comprehensiveness": comp, "sufficiency": suff}
            w.writerow({**row, "prob": probs[example]} if probs is not None else row)


@pytest.fixture
def write_results():
    """``write_results(folder, rows, probs=None)``: a run folder's ``results.csv``, as the scripts read it."""
    return _write_results


@pytest.fixture
def random_graph():
    """Two random 5-node graphs teleporting to node 0, the second with node 4 masked out, and their PageRank:
    ``(adjacency, teleport, mask, reference)``."""
    from captum_prxai import pagerank

    torch.manual_seed(0)
    adjacency = torch.rand(2, 5, 5, dtype=torch.float64)
    teleport = torch.zeros(2, 5, dtype=torch.float64)
    teleport[:, 0] = 1.0
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[1, 4] = False
    reference = pagerank(adjacency, 0.7, personalization=teleport, node_mask=mask, tol=1e-12, max_iter=1000)
    return adjacency, teleport, mask, reference


# -- tiny causal language models for the generation tests ------------------------------------------------


def tiny_causal_lm(vocab_size: int, layers: int = 2):
    """A tiny random Llama causal LM (seed 0): ids 0, 1, 2 are padding, BOS and EOS."""
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=layers,
                                      num_attention_heads=2, num_key_value_heads=1, intermediate_size=32,
                                      max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return transformers.LlamaForCausalLM(config).eval()


def word_tokenizer(words, bos: bool = True, chat_template=None, specials=()):
    """A word-level fast tokenizer over ``words`` (``words[0:4]`` = ``<pad> <s> </s> <unk>``), split on white space;
    with ``bos`` it starts every text with ``<s>`` (as Llama's), else it adds none (as SmolLM2's)."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if bos:
        backend.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>",
        **({"additional_special_tokens": list(specials)} if specials else {}))
    if chat_template is not None:
        tok.chat_template = chat_template
    return tok


@pytest.fixture(autouse=True, scope="module")
def _method_registry_left_as_found():
    """Each test module leaves the method registry as it found it: methods that a benchmark script or a test
    registers while it runs (the research variants, a test's own methods) never leak into the next module's
    pickers and listings."""
    from captum_prxai.methods import METHODS

    saved = dict(METHODS)
    yield
    METHODS.clear()
    METHODS.update(saved)


def poll_job(client, job, jobs_url: str, timeout: float):
    """Poll an explorer job at ``jobs_url/<id>`` (a Flask test client) until it is done or cancelled."""
    import time

    deadline = time.monotonic() + timeout
    while job["status"] not in ("done", "cancelled"):
        assert time.monotonic() < deadline, f"job not done after {timeout} s: {job}"
        time.sleep(0.05)
        resp = client.get(f"{jobs_url}/{job['id']}")
        assert resp.status_code == 200, resp.json
        job = resp.json
    return job

