"""Generation faithfulness: does row k of an explanation name the prompt tokens that t_k depends on?

For each prompt the model continues greedily for ``N_OUT`` tokens (EOS suppressed); every method then
explains the continuation through Captum's LLM API (row ``k`` of ``token_attr`` explains
``p(t_k | prompt, t_<k)``). Under teacher forcing, for each output token k and each ERASER bin
(1/5/10/20/50% of the prompt's removable tokens, at least one):

* **comprehensiveness**: delete the top-ranked prompt tokens of row k and measure the drop of
  ``p(t_k | prompt, t_<k)`` (higher is better);
* **sufficiency**: keep only them and measure the drop (lower is better).

BOS and chat-template tokens (the role lines, the system prompt, the special tokens) are never
deleted and do not count towards the fractions. The token selection and deletion are the project's
own (:func:`captum_prxai.metrics.masking.remove_top_k`, ties broken by position); the probabilities
are read from one forward over ``perturbed prompt + t_0 .. t_{n-2}`` per distinct perturbed prompt,
which gives ``p(t_k | ...)`` of every row k at once (a perturbed prompt shared by several rows, bins
or methods is run once). A prompt's score is the AOPC-style mean over the bins and the output
tokens; a cell's score is the mean ± one standard error over its prompts, and methods are compared
by the paired difference default − method on the same prompts (``captum_prxai.bench.report``'s
convention). "Signed in practice": the share of negative scores among the bottom-ranked 20% (at
least one) of each row's removable tokens.

Sources (each split into tune / held-out halves by
:func:`captum_prxai.bench.ablation.dataset_half`, then sampled with
:func:`captum_prxai.bench.runner.select_examples`, so a larger ``--n`` extends a smaller one):

* ``cloze``: short factual prompts written for this benchmark (no package ships such a set):
  capitals, official languages and the country of a capital, whose continuation is fixed by one or
  two prompt words;
* ``narrative``: the first sentence (at most 24 words) of the test split's movie reviews and BBC
  News articles (``captum_prxai.data``);
* ``chat``: an instruction on a test sentence of movie-sentences, in the model's chat template
  (``tokenizer.apply_chat_template``, with its default system prompt and the generation prompt).

Plain prompts start with the tokenizer's BOS token (SmolLM2's tokenizer adds none).

Each (model, source, half, prompt, method) record goes to ``cache.jsonl`` in the output folder
(:class:`captum_prxai.bench.cache.RecordCache`), so a rerun computes only what is missing;
``--table`` writes ``summary.md`` from the cache alone. CPU time is process time around the
attribution call only (set ``--threads 1``).

Precomputed methods (``--precomputed NAME=PATH``, e.g. AttnLRP from ``lxt``, which runs in its own venv:
``benchmarks/attnlrp/generation_scores.py``) read their rows from a JSON Lines file, one line per prompt
(:class:`Precomputed`); the same deletion code scores them, and their CPU time is the one the file states.
A prompt whose ids or continuation differ from the file's is refused; a prompt the file does not cover is
skipped (logged), its continuation is not generated for it.

    python benchmarks/generation.py --models smollm2 --n 50 --methods graph,random --threads 1
    python benchmarks/generation.py --models smollm2 --n 50 --methods attnlrp --threads 1 \\
        --precomputed attnlrp=benchmarks/results/generation-attnlrp/smollm2/scores.jsonl
    python benchmarks/generation.py --table
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import shlex
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' own modules
from research_methods import RESEARCH_VARIANTS  # noqa: E402  (the default search's candidates)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "generation"

#: output tokens explained per prompt
N_OUT = 8
#: narrative prompts are cut to this many words
MAX_WORDS = 24
#: bottom-ranked share of a row whose negative scores are counted
BOTTOM = 0.2
SOURCES = ("cloze", "narrative", "chat")
HALVES = ("tune", "holdout")
DEFAULT = "pr-xai"
GRAPH_METHODS = ("pr-xai", "pr-a", "pr-g", "pr-ag", "pr-tag", "raw-attention", "rollout")
CAPTUM_METHODS = ("feature-ablation", "lig")
METHODS = GRAPH_METHODS + ("random",) + CAPTUM_METHODS
LABELS = {"pr-xai": "PR-XAI default", "pr-a": "PR-A", "pr-g": "PR-G", "pr-ag": "PR-AG", "pr-tag": "PR-TAG",
          "raw-attention": "Raw attention", "rollout": "Rollout", "random": "Random",
          "feature-ablation": "Captum FeatureAblation", "lig": "Captum LIG", "attnlrp": "AttnLRP (lxt)"}
#: the record of a prompt's greedy continuation (not a method)
TARGET = "_target"
MODELS = ("smollm2", "gemma3-270m")

# ----------------------------------------------------------------------------------------------- data
#: (country, capital, official language): the cloze set, written for this benchmark
COUNTRIES: Tuple[Tuple[str, str, str], ...] = (
    ("France", "Paris", "French"), ("Germany", "Berlin", "German"), ("Italy", "Rome", "Italian"),
    ("Spain", "Madrid", "Spanish"), ("Portugal", "Lisbon", "Portuguese"), ("Japan", "Tokyo", "Japanese"),
    ("China", "Beijing", "Chinese"), ("Russia", "Moscow", "Russian"), ("Egypt", "Cairo", "Arabic"),
    ("Greece", "Athens", "Greek"), ("Turkey", "Ankara", "Turkish"), ("Poland", "Warsaw", "Polish"),
    ("Sweden", "Stockholm", "Swedish"), ("Norway", "Oslo", "Norwegian"), ("Finland", "Helsinki", "Finnish"),
    ("Denmark", "Copenhagen", "Danish"), ("the Netherlands", "Amsterdam", "Dutch"),
    ("Austria", "Vienna", "German"), ("Hungary", "Budapest", "Hungarian"), ("Ireland", "Dublin", "English"),
    ("the United Kingdom", "London", "English"), ("Canada", "Ottawa", "English"),
    ("Mexico", "Mexico City", "Spanish"), ("Brazil", "Brasília", "Portuguese"),
    ("Argentina", "Buenos Aires", "Spanish"), ("Chile", "Santiago", "Spanish"), ("Peru", "Lima", "Spanish"),
    ("Colombia", "Bogotá", "Spanish"), ("India", "New Delhi", "Hindi"), ("Thailand", "Bangkok", "Thai"),
    ("Vietnam", "Hanoi", "Vietnamese"), ("South Korea", "Seoul", "Korean"),
    ("Indonesia", "Jakarta", "Indonesian"), ("Iran", "Tehran", "Persian"), ("Iraq", "Baghdad", "Arabic"),
    ("Saudi Arabia", "Riyadh", "Arabic"), ("Kenya", "Nairobi", "Swahili"), ("Nigeria", "Abuja", "English"),
    ("Ethiopia", "Addis Ababa", "Amharic"), ("Morocco", "Rabat", "Arabic"),
    ("Australia", "Canberra", "English"), ("New Zealand", "Wellington", "English"),
    ("Ukraine", "Kyiv", "Ukrainian"), ("the Czech Republic", "Prague", "Czech"),
    ("Romania", "Bucharest", "Romanian"), ("Bulgaria", "Sofia", "Bulgarian"), ("Serbia", "Belgrade", "Serbian"),
    ("Croatia", "Zagreb", "Croatian"), ("Belgium", "Brussels", "Dutch"), ("Switzerland", "Bern", "German"),
    ("Israel", "Jerusalem", "Hebrew"), ("Pakistan", "Islamabad", "Urdu"), ("Bangladesh", "Dhaka", "Bengali"),
    ("the Philippines", "Manila", "Filipino"), ("Malaysia", "Kuala Lumpur", "Malay"),
    ("Cuba", "Havana", "Spanish"), ("Venezuela", "Caracas", "Spanish"), ("Iceland", "Reykjavik", "Icelandic"),
    ("Estonia", "Tallinn", "Estonian"), ("Latvia", "Riga", "Latvian"), ("Lithuania", "Vilnius", "Lithuanian"),
)
#: (template, which field is the expected answer)
CLOZE_TEMPLATES = (("The capital of {country} is", "capital"),
                   ("The official language of {country} is", "language"),
                   ("{capital} is the capital city of", "country"))
#: instructions of the chat source; {text} is a movie-sentences test sentence
INSTRUCTIONS = ("Summarize this sentence in a few words: {text}",
                "Is this movie review positive or negative? {text}",
                "Rewrite this sentence in simpler words: {text}",
                "Translate into French: {text}",
                "What is the main topic of this sentence? {text}")


@dataclass(frozen=True)
class Source:
    """One prompt of a source, before tokenization: ``text`` is the user's part, ``answer`` (cloze only)
    the word its continuation should contain."""

    text: str
    answer: Optional[str] = None


def cloze_sources() -> List[Source]:
    """The written cloze set: every template on every country."""
    out = []
    for template, field in CLOZE_TEMPLATES:
        for country, capital, language in COUNTRIES:
            text = template.format(country=country, capital=capital)
            out.append(Source(text[0].upper() + text[1:], {"capital": capital, "language": language,
                                                           "country": country.replace("the ", "")}[field]))
    return out


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    for stop in (" . ", ". ", "! ", "? "):
        cut = text.find(stop)
        if 0 < cut:
            text = text[: cut + len(stop)].rstrip()
            break
    return " ".join(text.split()[:MAX_WORDS])


def narrative_sources() -> List[Source]:
    """First sentences of the test split's movie reviews, then of its BBC News articles."""
    from captum_prxai.data import load_dataset

    return [Source(_first_sentence(t)) for name in ("movie-reviews", "bbc-news")
            for t in load_dataset(name, "test").texts]


def chat_sources() -> List[Source]:
    """An instruction (cycling through :data:`INSTRUCTIONS`) on each short movie-sentences test sentence."""
    from captum_prxai.data import load_dataset

    sentences = [t for t in load_dataset("movie-sentences", "test").texts if 4 <= len(t.split()) <= 20]
    return [Source(INSTRUCTIONS[i % len(INSTRUCTIONS)].format(text=s)) for i, s in enumerate(sentences)]


SOURCE_LOADERS: Dict[str, Callable[[], List[Source]]] = {
    "cloze": cloze_sources, "narrative": narrative_sources, "chat": chat_sources}


def source_half(items: Sequence[Source], name: str, half: str) -> List[Source]:
    """The ``tune`` or ``holdout`` half of a source, by the classifier matrix's rule
    (:func:`captum_prxai.bench.ablation.dataset_half`)."""
    from captum_prxai.bench.ablation import dataset_half
    from captum_prxai.data import TextDataset

    index = [str(i) for i in range(len(items))]
    part = dataset_half(TextDataset(name=name, split="test", texts=index, labels=[0] * len(items),
                                    label_names=["none"]), half)
    return [items[int(i)] for i in part.texts]


@dataclass
class Prompt:
    """A tokenized prompt: ``text`` is what the model reads (BOS or chat template included), ``ids`` its
    ``(n_in,)`` token ids and ``protected`` ``(n_in,)`` True for the BOS / template tokens never deleted."""

    source: str
    half: str
    index: int
    text: str
    ids: Tensor
    protected: Tensor
    answer: Optional[str] = None

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]


def build_prompt(tokenizer: Any, source: str, item: Source) -> Tuple[str, Tuple[int, int]]:
    """The model's input text and the character span of the user's part in it.

    A chat prompt is the instruction in the tokenizer's chat template; a tokenizer without one (a base model,
    such as Gemma 3 270M) gets the instruction as plain text. Plain text starts with the BOS token, written into
    the text only where the tokenizer does not add it itself."""
    if source == "chat" and getattr(tokenizer, "chat_template", None):
        marker = "\u0000"
        templated = tokenizer.apply_chat_template([{"role": "user", "content": marker}], tokenize=False,
                                                  add_generation_prompt=True)
        start = templated.index(marker)
        return templated.replace(marker, item.text), (start, start + len(item.text))
    bos = getattr(tokenizer, "bos_token", None) or ""
    if bos and tokenizer("x")["input_ids"][:1] == [tokenizer.bos_token_id]:
        bos = ""  # the tokenizer adds it
    return bos + item.text, (len(bos), len(bos) + len(item.text))


def tokenize_prompt(tokenizer: Any, source: str, half: str, index: int, item: Source) -> Prompt:
    """Tokenize as Captum's :class:`~captum.attr.TextTokenInput` does, and protect every token outside
    the user's part (and every special token)."""
    from captum.attr import TextTokenInput

    text, (lo, hi) = build_prompt(tokenizer, source, item)
    ids = TextTokenInput(text, tokenizer).inp_tensor[0]
    enc = tokenizer(text, return_offsets_mapping=True)
    if list(enc["input_ids"]) != ids.tolist():
        raise RuntimeError(f"offsets tokenization differs from TextTokenInput's for {text!r}")
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    protected = torch.tensor([tid in special or not (lo <= a and b <= hi and b > a)
                              for tid, (a, b) in zip(ids.tolist(), enc["offset_mapping"])])
    if bool(protected.all()):
        raise RuntimeError(f"prompt {text!r} has no removable token")
    return Prompt(source, half, index, text, ids, protected, item.answer)


def load_prompts(tokenizer: Any, sources: Sequence[str], halves: Sequence[str], n: int,
                 items: Optional[Dict[str, List[Source]]] = None) -> Dict[Tuple[str, str], List[Prompt]]:
    """``n`` prompts per (source, half): a seeded sample of the half, a prefix-stable one."""
    from captum_prxai.bench.runner import select_examples

    out = {}
    for source in sources:
        every = items[source] if items is not None else SOURCE_LOADERS[source]()
        for half in halves:
            part = source_half(every, source, half)
            out[(source, half)] = [tokenize_prompt(tokenizer, source, half, i, part[i])
                                   for i in select_examples(len(part), n)]
    return out


# -------------------------------------------------------------------------------------------- metric
class TargetProbs:
    """``p(t_k | perturbed prompt, t_<k)`` for every k, one forward per distinct perturbed prompt (memoised).

    With ``prompt_ids``, the prompt and the teacher-forced continuation run once with a KV cache, and a
    perturbed prompt runs only from its first changed token on, on the cached keys and values of the
    unchanged prefix (BOS, the chat template's head, the tokens before the first deletion): the same
    probabilities as a full forward, up to float rounding (tested), for a fraction of the cost.

    Args:
        model: A Hugging Face causal LM.
        target: ``(n_out,)`` the continuation, teacher-forced.
        prompt_ids: ``(n_in,)`` the unperturbed prompt, whose cached prefix the variants reuse; ``None``
            runs every variant in full.
        batch_size: Sequences per forward (all of one length and one cached prefix: no padding).
    """

    def __init__(self, model: torch.nn.Module, target: Tensor, prompt_ids: Optional[Tensor] = None,
                 batch_size: int = 16) -> None:
        self.model, self.target, self.batch_size = model, target.long().reshape(-1), batch_size
        self.memo: Dict[Tuple[int, ...], Tensor] = {}
        self.forwards = 0
        self.prompt: Optional[Tuple[int, ...]] = None
        self.kv: List[Tuple[Tensor, Tensor]] = []
        self._cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        if prompt_ids is not None:
            self._prime(tuple(int(t) for t in prompt_ids.reshape(-1).tolist()))

    def _pick(self, logits: Tensor) -> Tensor:
        n_out = self.target.numel()
        probs = torch.softmax(logits[:, -n_out:].float(), dim=-1)
        return probs.gather(2, self.target.view(1, -1, 1).expand(logits.shape[0], -1, 1))[..., 0]

    def _prime(self, prompt: Tuple[int, ...]) -> None:
        """Run the prompt once with a cache: its probabilities and the keys and values of every layer."""
        ids = torch.tensor([prompt + tuple(self.target[:-1].tolist())], dtype=torch.long)
        with torch.no_grad():
            out = self.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True)
        self.forwards += 1
        cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        layers = getattr(cache, "layers", None)
        if layers and all(hasattr(layer, "keys") and getattr(layer, "keys") is not None for layer in layers):
            self.kv = [(layer.keys, layer.values) for layer in layers]
            self.prompt = prompt
        self.memo[prompt] = self._pick(out.logits)[0]

    def _shared(self, variant: Tuple[int, ...]) -> int:
        """Tokens at the start of ``variant`` that equal the prompt's (at most ``len(variant) - 1``)."""
        if self.prompt is None:
            return 0
        limit = min(len(variant) - 1, len(self.prompt))
        shared = 0
        while shared < limit and variant[shared] == self.prompt[shared]:
            shared += 1
        return shared

    def __call__(self, variants: Sequence[Tuple[int, ...]]) -> Tensor:
        """``(len(variants), n_out)`` target probabilities."""
        from transformers import DynamicCache

        todo = sorted({v for v in variants if v not in self.memo}, key=len)
        groups: Dict[Tuple[int, int], List[Tuple[int, ...]]] = {}
        for v in todo:
            groups.setdefault((self._shared(v), len(v)), []).append(v)
        n_out = self.target.numel()
        tail = self.target[:-1]
        with torch.no_grad():
            for (shared, _), group in groups.items():
                for start in range(0, len(group), self.batch_size):
                    chunk = group[start: start + self.batch_size]
                    ids = torch.cat([torch.tensor(chunk, dtype=torch.long), tail.expand(len(chunk), -1)], dim=1)
                    kwargs: Dict[str, Any] = {"attention_mask": torch.ones_like(ids), "logits_to_keep": n_out}
                    if shared:
                        cache = DynamicCache()
                        for layer, (keys, values) in enumerate(self.kv):
                            cache.update(keys[:, :, :shared].expand(len(chunk), -1, -1, -1).contiguous(),
                                         values[:, :, :shared].expand(len(chunk), -1, -1, -1).contiguous(), layer)
                        kwargs.update({self._cache_arg: cache, "use_cache": True})
                    else:
                        kwargs["use_cache"] = False
                    logits = self.model(input_ids=ids[:, shared:], **kwargs).logits
                    self.forwards += 1
                    for v, row in zip(chunk, self._pick(logits)):
                        self.memo[v] = row
        return torch.stack([self.memo[v] for v in variants]) if variants else torch.zeros(0, n_out)


def faithfulness(prob_fn: Callable[[Sequence[Tuple[int, ...]]], Tensor], prompt_ids: Tensor, protected: Tensor,
                 scores: Tensor, bins: Sequence[float]) -> Dict[str, Any]:
    """Comprehensiveness and sufficiency of one prompt's ``(n_out, n_in)`` attribution rows.

    Args:
        prob_fn: Maps perturbed prompts (tuples of ids) to ``(V, n_out)`` target probabilities under
            teacher forcing (:class:`TargetProbs`).
        prompt_ids: ``(n_in,)`` the prompt.
        protected: ``(n_in,)`` True for tokens never deleted (BOS, template).
        scores: ``(n_out, n_in)`` row k explains output token k (higher = more relevant).
        bins: Fractions of the removable tokens.

    Returns:
        ``{"comprehensiveness", "sufficiency"}``: the mean over bins and rows; ``"comp_bins"``,
        ``"suff_bins"``: per bin (mean over rows); ``"comp_rows"``, ``"suff_rows"``: per row (mean over
        bins); ``"negative_bottom"``: the share of negative scores among each row's bottom-ranked
        :data:`BOTTOM` removable tokens (at least one).
    """
    from captum_prxai.metrics.masking import remove_top_k, select_tokens

    n_out, n_in = scores.shape
    ids = prompt_ids.reshape(1, -1).expand(n_out, -1)
    mask = torch.ones(n_out, n_in, dtype=torch.long)
    special = protected.reshape(1, -1).expand(n_out, -1).long()
    scores = scores.detach().double().cpu()
    full = prob_fn([tuple(prompt_ids.tolist())])[0]
    rows = torch.arange(n_out)
    drops = {}
    for name, keep in (("comp", False), ("suff", True)):
        per_bin = []
        for fraction in bins:
            new_ids, new_mask = remove_top_k(ids, mask, special, scores, fraction, mode="delete", keep=keep)
            variants = [tuple(new_ids[k][new_mask[k].bool()].tolist()) for k in range(n_out)]
            probs = prob_fn(variants)  # (n_out rows, n_out positions): row k reads position k
            per_bin.append(full - probs[rows, rows])
        drops[name] = torch.stack(per_bin, dim=1).double()  # (n_out, n_bins)
    bottom = select_tokens(scores, mask, special, BOTTOM, largest=False)
    negative = ((scores < 0) & bottom).sum(1).double() / bottom.sum(1).clamp_min(1).double()
    return {"comprehensiveness": float(drops["comp"].mean()), "sufficiency": float(drops["suff"].mean()),
            "comp_bins": drops["comp"].mean(0).tolist(), "suff_bins": drops["suff"].mean(0).tolist(),
            "comp_rows": drops["comp"].mean(1).tolist(), "suff_rows": drops["suff"].mean(1).tolist(),
            "negative_bottom": float(negative.mean()), "full_probs": full.tolist()}


# ------------------------------------------------------------------------------------------- methods
Explain = Callable[[Prompt, Tensor], Tensor]


def make_method(name: str, model: torch.nn.Module, tokenizer: Any, lig_steps: int) -> Explain:
    """``explain(prompt, target) -> (n_out, n_in)`` scores of one method, through Captum's LLM API."""
    from captum.attr import (FeatureAblation, LayerIntegratedGradients, LLMAttribution, LLMGradientAttribution,
                             TextTokenInput)

    import captum_prxai as cp
    from captum_prxai.llm import LLMGraphAttribution

    def rows(wrapper: Any, **kwargs: Any) -> Explain:
        def explain(prompt: Prompt, target: Tensor) -> Tensor:
            inp = TextTokenInput(prompt.text, tokenizer)
            return wrapper.attribute(inp, target=target, **kwargs).token_attr.detach().float()
        return explain

    graph = {"pr-xai": cp.PageRankAttribution, "pr-a": cp.PRAttention, "pr-g": cp.PRGradient,
             "pr-ag": cp.PRAttentionGradient, "pr-tag": cp.PRTemperedAttentionGradient,
             "raw-attention": cp.RawAttention, "rollout": cp.AttentionRollout}
    if name in graph or name in RESEARCH_VARIANTS:
        method = graph[name](model, cp.attention_layers(model)) if name in graph else cp.PageRankAttribution(
            model, cp.attention_layers(model), **RESEARCH_VARIANTS[name])  # a candidate of the default search
        wrapper = LLMGraphAttribution(method, tokenizer)
        # one column per prompt token, as Captum's wrappers give (the protected ones are never deleted anyway)
        keep_all = {"skip_special_tokens": False} if "skip_special_tokens" in inspect.signature(
            wrapper.attribute).parameters else {}
        explain = rows(wrapper, **keep_all)
        if isinstance(method, cp.PageRankAttribution):  # the spec its rows run with (recorded for the default)
            explain.spec = method.for_task("generation").spec  # type: ignore[attr-defined]
        return explain
    if name == "feature-ablation":  # one forward per ablated token (Captum's faster mode; same scores)
        return rows(LLMAttribution(FeatureAblation(model), tokenizer), forward_in_tokens=False)
    if name == "lig":
        lig = LayerIntegratedGradients(model, model.get_input_embeddings())
        return rows(LLMGradientAttribution(lig, tokenizer), n_steps=lig_steps)
    if name == "random":
        def explain(prompt: Prompt, target: Tensor) -> Tensor:
            seed = int(prompt.sha, 16) % (2**31)
            return torch.rand(target.numel(), prompt.ids.numel(), generator=torch.Generator().manual_seed(seed))
        return explain
    raise ValueError(f"unknown method {name!r}; choose from {', '.join(METHODS)}")


class Precomputed:
    """Rows computed elsewhere (another environment, e.g. lxt's AttnLRP), one JSON line per prompt.

    Each line has ``model`` (a name of :data:`MODELS`), ``source``, ``half``, ``example``, ``text_sha``
    (:attr:`Prompt.sha`), ``input_ids`` (the prompt's ids exactly as :func:`tokenize_prompt` gives them),
    ``target`` (the continuation of the prompt's ``_target`` record), ``rows`` (``(n_out, n_in)``: row k
    explains output token k) and ``cpu_s`` (the CPU time of computing the rows, reported as the method's).

    Args:
        path: The JSON Lines file.

    Raises:
        PRXAIError: Missing or malformed file.
    """

    FIELDS = ("model", "source", "half", "example", "text_sha", "input_ids", "target", "rows", "cpu_s")

    def __init__(self, path: Path) -> None:
        from captum_prxai.exceptions import PRXAIError

        self.path = Path(path)
        if not self.path.is_file():
            raise PRXAIError(f"no precomputed scores at {self.path}.")
        self.lines: Dict[Tuple[str, str, str, int], Dict[str, Any]] = {}
        for line_no, text in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
                absent = [f for f in self.FIELDS if f not in line]
            except (ValueError, TypeError) as err:
                raise PRXAIError(f"{self.path}:{line_no}: not a JSON object ({err}).") from None
            if absent:
                raise PRXAIError(f"{self.path}:{line_no}: missing {', '.join(absent)}.")
            self.lines[(str(line["model"]), str(line["source"]), str(line["half"]), int(line["example"]))] = line

    def line(self, model_name: str, prompt: Prompt) -> Optional[Dict[str, Any]]:
        """The file's line for ``prompt`` of ``model_name`` (``None``: not covered)."""
        return self.lines.get((model_name, prompt.source, prompt.half, prompt.index))

    def sha(self, model_name: str, prompt: Prompt) -> Optional[str]:
        """A hash of the line's ids, continuation and rows (kept in the record: a changed line is scored again)."""
        line = self.line(model_name, prompt)
        if line is None:
            return None
        blob = json.dumps([line["input_ids"], line["target"], line["rows"]])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def rows(self, model_name: str, prompt: Prompt, target: Tensor) -> Tuple[Tensor, float]:
        """``((n_out, n_in) rows, cpu_s)`` for ``prompt`` and its continuation ``target``.

        Raises:
            PRXAIError: The file has no line for the prompt, or its line was computed on other ids or
                another continuation.
        """
        from captum_prxai.exceptions import PRXAIError

        line = self.line(model_name, prompt)
        where = f"{model_name} {prompt.source}/{prompt.half} example {prompt.index}"
        if line is None:
            raise PRXAIError(f"{self.path} has no line for {where}.")
        ids = prompt.ids.tolist()
        if line["text_sha"] != prompt.sha or [int(i) for i in line["input_ids"]] != ids:
            raise PRXAIError(f"{self.path}: the prompt of {where} differs from the benchmark's (file: "
                             f"{len(line['input_ids'])} ids, text {line['text_sha']}; benchmark: {len(ids)} ids, "
                             f"text {prompt.sha}); export and score the prompts again.")
        if [int(t) for t in line["target"]] != target.tolist():
            raise PRXAIError(f"{self.path}: the continuation of {where} differs from the benchmark's "
                             f"({line['target']} against {target.tolist()}); export and score the prompts again.")
        return torch.tensor(line["rows"], dtype=torch.float32), float(line["cpu_s"])


def method_options(name: str, lig_steps: int) -> Dict[str, Any]:
    """What a method's record depends on beyond the model and the prompt (the default: the generation choices
    its "auto" options resolve to, so that records of an earlier default are never taken for the current one)."""
    if name == DEFAULT:
        from captum_prxai.recommended import GENERATION_CHOICES

        return {"generation_choices": dict(sorted(GENERATION_CHOICES.items()))}
    return {"n_steps": lig_steps} if name == "lig" else {"forward_in_tokens": False} if name == "feature-ablation" else {}


#: The records of ``pr-xai`` made before the generation default existed ran the decoders' classification default,
#: PR-TAG± (log-prob.): they carry no ``spec`` and count as that research variant (:func:`collect`).
FORMER_DEFAULT = "pr-tag-pm-lp"


# ---------------------------------------------------------------------------------------------- runs
def _keys(model_id: Dict[str, Any], source: str, half: str, names: Iterable[str], lig_steps: int,
          bins: Sequence[float]) -> Dict[str, str]:
    from captum_prxai.bench.cache import record_key

    common = {"model": model_id, "source": source, "half": half, "n_out": N_OUT, "bins": list(bins),
              "bottom": BOTTOM, "protocol": "teacher-forced deletion v1"}
    return {m: record_key({**common, "method": m, "options": method_options(m, lig_steps)})
            for m in [TARGET, *names]}


def generate(model: torch.nn.Module, tokenizer: Any, prompt: Prompt) -> Tensor:
    """The greedy continuation of ``N_OUT`` tokens (EOS suppressed by ``min_new_tokens``)."""
    ids = prompt.ids.reshape(1, -1)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=N_OUT,
                             min_new_tokens=N_OUT, do_sample=False, temperature=None, top_p=None, top_k=None,
                             pad_token_id=pad)
    return out[0, ids.shape[1]:]


def run(model_name: str, model: torch.nn.Module, tokenizer: Any, prompts: Dict[Tuple[str, str], List[Prompt]],
        names: Sequence[str], out: Path, lig_steps: int = 8, bins: Optional[Sequence[float]] = None,
        log: Callable[[str], None] = print, memo: Optional[Dict[str, "TargetProbs"]] = None,
        precomputed: Optional[Dict[str, Precomputed]] = None) -> Dict[str, int]:
    """Explain and score every prompt with every method, skipping what the cache holds.

    Prompts are visited round-robin over the (source, half) cells, so every cell fills at the same pace.
    ``memo`` (by prompt hash) keeps the perturbed prompts' probabilities between calls of one process.
    ``precomputed`` maps method names of ``names`` to their rows' files (:class:`Precomputed`); a prompt a
    file does not cover is skipped for that method (counted in ``"skipped"``).

    Returns:
        ``{"computed": records written, "cached": records reused}``.
    """
    from captum_prxai.bench.cache import RecordCache, model_fingerprint
    from captum_prxai.metrics import ERASER_BINS

    bins = tuple(ERASER_BINS if bins is None else bins)
    cache = RecordCache(out / "cache.jsonl")
    model_id = {"name": model_name, **model_fingerprint(model)}
    keys = {cell: _keys(model_id, *cell, names, lig_steps, bins) for cell in prompts}
    done = cache.read({k for ks in keys.values() for k in ks.values()})
    have = {(rid[0], rid[1], rid[2], rid[3]): rec for rid, rec in done.items()}
    explainers: Dict[str, Explain] = {}
    pre = precomputed or {}
    counts = {"computed": 0, "cached": 0}
    longest = max((len(p) for p in prompts.values()), default=0)
    for i in range(longest):
        for cell, cell_prompts in prompts.items():
            if i >= len(cell_prompts):
                continue
            prompt, ks = cell_prompts[i], keys[cell]
            base = {"model": model_name, "source": cell[0], "half": cell[1], "text_sha": prompt.sha,
                    "example": prompt.index, "label": None}
            missing = [m for m in names if (ks[m], prompt.index, m, prompt.sha) not in have
                       or (m in pre and have[(ks[m], prompt.index, m, prompt.sha)].get("scores_sha")
                           != pre[m].sha(model_name, prompt))]
            counts["cached"] += len(names) - len(missing)
            uncovered = [m for m in missing if m in pre and pre[m].line(model_name, prompt) is None]
            if uncovered:
                counts["skipped"] = counts.get("skipped", 0) + len(uncovered)
                log(f"{model_name} {cell[0]}/{cell[1]} (example {prompt.index}): no precomputed rows of "
                    f"{', '.join(uncovered)}; skipped")
                missing = [m for m in missing if m not in uncovered]
            if not missing:
                continue
            tkey = (ks[TARGET], prompt.index, TARGET, prompt.sha)
            if tkey in have:
                target = torch.tensor(have[tkey]["target"], dtype=torch.long)
            else:
                target = generate(model, tokenizer, prompt)
                text = tokenizer.decode(target)
                rec = {**base, "config_key": ks[TARGET], "method": TARGET, "target": target.tolist(),
                       "continuation": text, "prompt": prompt.text, "n_in": int(prompt.ids.numel()),
                       "n_removable": int((~prompt.protected).sum()),
                       "answer_found": None if prompt.answer is None else prompt.answer.lower() in text.lower()}
                cache.append(rec)
                have[tkey] = rec
            probs = memo.get(prompt.sha) if memo is not None else None
            if probs is None or probs.target.tolist() != target.tolist():
                probs = TargetProbs(model, target, prompt.ids)
                if memo is not None:
                    memo[prompt.sha] = probs
            for m in missing:
                extra: Dict[str, Any] = {}
                if m in pre:  # rows and CPU time from the file
                    scores, cpu = pre[m].rows(model_name, prompt, target)
                    extra["scores_sha"] = pre[m].sha(model_name, prompt)
                else:
                    if m not in explainers:
                        explainers[m] = make_method(m, model, tokenizer, lig_steps)
                    start = time.process_time()
                    scores = explainers[m](prompt, target)
                    cpu = time.process_time() - start
                if scores.shape != (target.numel(), prompt.ids.numel()):
                    raise RuntimeError(f"{m} returned scores of shape {tuple(scores.shape)}, expected "
                                       f"{(target.numel(), prompt.ids.numel())}")
                result = faithfulness(probs, prompt.ids, prompt.protected, scores, bins)
                if m == DEFAULT:  # the spec its rows ran with
                    extra = {**extra, "spec": {k: v for k, v in explainers[m].spec.as_dict().items()  # type: ignore
                                               if isinstance(v, (str, int, float, bool, type(None)))}}
                rec = {**base, "config_key": ks[m], "method": m, "cpu_s": cpu, **extra, **result}
                cache.append(rec)
                have[(ks[m], prompt.index, m, prompt.sha)] = rec
                counts["computed"] += 1
                log(f"{model_name} {cell[0]}/{cell[1]} #{i + 1} (example {prompt.index}) {m}: "
                    f"comp {result['comprehensiveness']:+.4f} suff {result['sufficiency']:+.4f} "
                    f"cpu {cpu:.2f}s forwards {probs.forwards}")
    return counts


# --------------------------------------------------------------------------------------------- table
def _stat(values: Sequence[float]) -> Dict[str, float]:
    from captum_prxai.metrics.stats import mean_sem

    mean, sem = mean_sem(list(values))
    return {"mean": mean, "sem": sem, "n": len(values)}


def collect(records: Iterable[Dict[str, Any]]) -> Dict[Tuple[str, str, str], Dict[str, Dict[str, Dict[str, Any]]]]:
    """``{(model, source, half): {method: {example: record}}}``: the latest record of each (the cache keeps the
    records of earlier settings too, e.g. of a method whose options changed)."""
    cells: Dict[Tuple[str, str, str], Dict[str, Dict[str, Dict[str, Any]]]] = {}
    for rec in records:
        cell = (rec["model"], rec["source"], rec["half"])
        method = FORMER_DEFAULT if rec["method"] == DEFAULT and "spec" not in rec else rec["method"]
        cells.setdefault(cell, {}).setdefault(method, {})[rec["example"]] = rec
    return cells


def _label(name: str) -> str:
    """A method's label in the tables: the benchmark's own, else the registry's (the research variants)."""
    from captum_prxai.methods import METHODS as REGISTRY

    if name in LABELS:
        return LABELS[name]
    return REGISTRY[name].label if name in REGISTRY else name


def _ordered(cells: Dict) -> List[Tuple[str, str, str]]:
    def rank(cell: Tuple[str, str, str]) -> Tuple:
        model, source, half = cell
        return (MODELS.index(model) if model in MODELS else 99, model,
                SOURCES.index(source) if source in SOURCES else 99, source, HALVES.index(half))
    return sorted(cells, key=rank)


def write_table(records: Iterable[Dict[str, Any]], path: Path, command: str, notes: Sequence[str] = ()) -> Path:
    """``summary.md``: per (model × source × half) cell, each method's comprehensiveness, sufficiency,
    share of negative bottom scores and CPU time, and the paired differences default − method."""
    from captum_prxai.bench.cache import write_atomic
    from captum_prxai.bench.report import format_signed, format_stat, markdown_table, paired_difference, paired_verdict

    cells = collect(records)
    lines = ["# Generation faithfulness", "", "```", command, "```", "",
             f"Protocol (`benchmarks/generation.py`): each prompt is continued greedily for {N_OUT} tokens; for each "
             "output token k, under teacher forcing, the top-ranked prompt tokens of row k are deleted "
             "(comprehensiveness: drop of p(t_k | prompt, t_<k), higher is better) or kept alone (sufficiency: "
             "drop, lower is better), at 1/5/10/20/50% of the prompt's removable tokens (at least one; BOS and "
             "chat-template tokens are never deleted). A prompt's score is the mean over the bins and the "
             f"{N_OUT} output tokens; cells give the mean ± one standard error over prompts. \"Neg. bottom\": the "
             f"share of negative scores among each row's bottom-ranked {BOTTOM:.0%} removable tokens (a signed "
             "method that is signed in practice puts its negative scores there). CPU: process time of the "
             "attribution call per prompt (all "
             f"{N_OUT} rows), one thread, on a shared 2-core machine.", ""]
    lines += [f"- {note}" for note in notes] + ([""] if notes else [])
    overview: List[List[str]] = []
    sections: List[str] = []
    for cell in _ordered(cells):
        by_method = cells[cell]
        targets = by_method.get(TARGET, {})
        methods = [m for m in METHODS if m in by_method] + sorted(m for m in by_method
                                                                 if m not in METHODS and m != TARGET)
        if not methods:
            continue
        model, source, half = cell
        found = [r["answer_found"] for r in targets.values() if r.get("answer_found") is not None]
        about = f"Prompts continued: {len(targets)}"
        if found:
            about += f"; the expected word is in the continuation of {sum(found)} of {len(found)}"
        sections += [f"## {model} · {source} · {half}", "", about + ".", ""]
        rows = []
        for m in sorted(methods, key=lambda m: -_stat([r["comprehensiveness"] for r in by_method[m].values()])["mean"]):
            recs = list(by_method[m].values())
            rows.append([_label(m), str(len(recs)),
                         format_stat(_stat([r["comprehensiveness"] for r in recs])),
                         format_stat(_stat([r["sufficiency"] for r in recs])),
                         f"{100 * _stat([r['negative_bottom'] for r in recs])['mean']:.0f}%",
                         f"{_stat([r['cpu_s'] for r in recs])['mean']:.2f}"])
        sections += markdown_table(["Method", "Prompts", "Comp. ↑", "Suff. ↓", "Neg. bottom", "CPU s / prompt"], rows)
        sections.append("")
        if DEFAULT in by_method:
            rows = []
            for m in methods:
                if m == DEFAULT:
                    continue
                diffs = {metric: paired_difference({e: r[metric] for e, r in by_method[DEFAULT].items()},
                                         {e: r[metric] for e, r in by_method[m].items()})
                         for metric in ("comprehensiveness", "sufficiency")}
                if diffs["comprehensiveness"]["n"] < 2:
                    continue
                comp, suff = diffs["comprehensiveness"], diffs["sufficiency"]
                rows.append([_label(m), str(comp["n"]), format_signed(comp), format_signed(suff), paired_verdict(comp, suff)])
                if m in CAPTUM_METHODS:
                    overview.append([model, source, half, LABELS[m], str(comp["n"]), format_signed(comp), format_signed(suff),
                                     paired_verdict(comp, suff)])
            if rows:
                sections += ["Paired differences, default − method, on the prompts both explained (comp. > 0 and "
                             "suff. < 0: the default is better; verdict: ahead / behind by more than one standard "
                             "error, else level):", ""]
                sections += markdown_table(["Method", "Prompts", "Δ comp.", "Δ suff.", "Default (comp. / suff.)"], rows)
                sections.append("")
    if overview:
        lines += ["## The default against Captum's LIG and FeatureAblation", ""]
        lines += markdown_table(["Model", "Source", "Half", "Rival", "Prompts", "Δ comp.", "Δ suff.",
                         "Default (comp. / suff.)"], overview)
        lines.append("")
    return write_atomic(path, "\n".join(lines + sections) + "\n")


# ---------------------------------------------------------------------------------------------- main
def _method_list(text: str, precomputed: Sequence[str] = ()) -> List[str]:
    names: List[str] = []
    for part in text.split(","):
        part = part.strip()
        expanded = list(GRAPH_METHODS) if part == "graph" else list(METHODS) if part == "all" else [part]
        for m in expanded:
            if m not in METHODS and m not in RESEARCH_VARIANTS and m not in precomputed:
                raise SystemExit(f"generation.py: unknown method {m!r}; choose from graph, all, "
                                 f"{', '.join(METHODS)} or a research variant ({', '.join(RESEARCH_VARIANTS)})")
            if m not in names:
                names.append(m)
    return names


def _library_state() -> str:
    """The commit and the uncommitted library files the run computes with (the library may change under a run)."""
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "?"

    dirty = git("status", "--porcelain", "--", "captum_prxai").splitlines()
    return f"commit {git('rev-parse', '--short', 'HEAD')}, uncommitted library files: " + (
        ", ".join(line.split(maxsplit=1)[-1] for line in dirty) or "none")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="smollm2", help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--methods", default="graph,random",
                        help="comma-separated method names, 'graph' (the seven graph methods) or 'all'; groups "
                             "separated by '+' run one after the other in each round")
    parser.add_argument("--sources", default=",".join(SOURCES))
    parser.add_argument("--half", choices=("tune", "holdout", "both"), default="both")
    parser.add_argument("--n", default="50", help="prompts per (source, half); a comma-separated list of "
                        "growing sizes runs in rounds (every method group on the first size, then the next)")
    parser.add_argument("--lig-steps", type=int, default=8, help="n_steps of Captum's LIG")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--table", action="store_true", help="only write summary.md from the cache")
    parser.add_argument("--note", action="append", default=[], help="a line for the table's notes")
    parser.add_argument("--precomputed", action="append", default=[], metavar="NAME=PATH",
                        help="a method whose rows are read from PATH (see Precomputed), named NAME in --methods")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    command = "python benchmarks/generation.py " + shlex.join(argv_list)

    from captum_prxai.bench.cache import RecordCache

    if args.table:
        records = RecordCache(out / "cache.jsonl").read().values()
        commands = (out / "COMMAND").read_text().strip() if (out / "COMMAND").is_file() else command
        write_table(records, out / "summary.md", commands, args.note)
        print(f"wrote {out / 'summary.md'}")
        return 0

    from captum_prxai.bench.runner import write_command

    from captum_prxai.exceptions import PRXAIError

    precomputed: Dict[str, Precomputed] = {}
    for spec in args.precomputed:
        name, _, path = spec.partition("=")
        if not name.strip() or not path.strip() or name.strip() in METHODS:
            raise SystemExit(f"generation.py: --precomputed takes NAME=PATH with a NAME not among the built-in "
                             f"methods; got {spec!r}")
        try:
            precomputed[name.strip()] = Precomputed(Path(path.strip()))
        except PRXAIError as err:
            raise SystemExit(f"generation.py: {err}") from None
    groups = [_method_list(group, tuple(precomputed)) for group in args.methods.split("+")]
    try:
        rounds = [int(x) for x in args.n.split(",")]
    except ValueError:
        raise SystemExit(f"generation.py: --n takes positive integers, e.g. 50 or 5,20,50; got {args.n!r}") from None
    if not rounds or min(rounds) < 1:
        raise SystemExit(f"generation.py: --n takes positive integers, got {args.n!r}")
    sources = [s.strip() for s in args.sources.split(",")]
    for s in sources:
        if s not in SOURCES:
            raise SystemExit(f"generation.py: unknown source {s!r}; choose from {', '.join(SOURCES)}")
    halves = HALVES if args.half == "both" else (args.half,)
    models = [m.strip() for m in args.models.split(",")]
    for m in models:
        if m not in MODELS:
            raise SystemExit(f"generation.py: unknown model {m!r}; choose from {', '.join(MODELS)}")
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="The first prompt token")
    warnings.filterwarnings("ignore", message=r"\(i=\d+, idx=\d+\)|Pretty tokens length")
    before = (out / "COMMAND").read_text(encoding="utf-8").splitlines() if (out / "COMMAND").is_file() else []
    if command not in before:  # each distinct command once, in the order first run
        write_command(out, "python benchmarks/generation.py", argv_list, append=True)
    log_file = (out / "progress.log").open("a", encoding="utf-8")

    def log(message: str) -> None:
        line = f"{time.strftime('%H:%M:%S', time.gmtime())} {message}"
        print(line, file=log_file, flush=True)
        print(line, file=sys.stderr, flush=True)

    from captum_prxai.models.decoder import load_decoder

    log(f"start: {command}; {_library_state()}")

    for model_name in models:
        model, tok = load_decoder(model_name)
        memo: Dict[str, TargetProbs] = {}
        items = {source: SOURCE_LOADERS[source]() for source in sources}
        for n in rounds:
            prompts = load_prompts(tok, sources, halves, n, items)
            for names in groups:
                log(f"{model_name}: {sum(len(p) for p in prompts.values())} prompts, methods {','.join(names)}")
                try:
                    counts = run(model_name, model, tok, prompts, names, out, lig_steps=args.lig_steps, log=log,
                                 memo=memo, precomputed={m: precomputed[m] for m in names if m in precomputed})
                except PRXAIError as err:  # a precomputed file that does not match the prompts
                    raise SystemExit(f"generation.py: {err}") from None
                log(f"{model_name}: {counts['computed']} records computed, {counts['cached']} from the cache")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
