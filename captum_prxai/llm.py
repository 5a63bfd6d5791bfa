"""PR-XAI for text generation, through Captum's LLM attribution API.

:class:`LLMGraphAttribution` wraps any attention-graph attribution of
captum-prxai (PR-A, PR-G, PR-AG and the attention baselines) built on a
Hugging Face causal language model, and explains a generated (or given)
continuation of a prompt the way Captum's
:class:`~captum.attr.LLMGradientAttribution` does: it takes Captum's
:class:`~captum.attr.TextTokenInput` or :class:`~captum.attr.TextTemplateInput`
and returns Captum's own :class:`~captum.attr.LLMAttributionResult`, whose
``token_attr`` row ``k`` explains ``log p(t_k | prompt, t_<k)``.

Where Captum runs one attribution (for Layer Integrated Gradients: 50
forward and backward passes) per output token, the whole ``n_out x n_in``
matrix here comes through the same capture -> graph -> PageRank pipeline as
classification (:func:`~captum_prxai.capture.capture_graph`, with the
method's resolved options):

* attention-only edges (PR-A, raw attention, rollout) need one forward pass
  over ``prompt + target``: row ``k`` is the graph of the causal prefix
  ``prompt + t_<k``, read from the same attention maps, with teleport to the
  position that predicts ``t_k``; all rows are one batched PageRank;
* gradient edges (PR-G, PR-AG, gradient-weighted rollout) differ per output
  token (one vector-Jacobian product each, down to the first attention
  layer); a chunk of rows is one forward and one backward pass over copies of
  the sequence on the batch axis, one copy per row.

It also takes a list of prompts (one result per prompt), chat prompts
(:func:`chat_input`), and saves results (:func:`save_result`,
:func:`load_result`).

See ``docs/llm.md`` for the semantics, the cost model and the limits.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import warnings
from copy import copy
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

import torch
from captum.attr import LLMAttributionResult, LLMGradientAttribution, TextTemplateInput, TextTokenInput
from captum.attr._core.llm_attr import DEFAULT_GEN_ARGS, BaseLLMAttribution, _convert_ids_to_pretty_tokens
from torch import Tensor, nn

from captum_prxai._tokenize import max_input_length
from captum_prxai.attr._base import AttentionGraphAttribution
from captum_prxai.attr.pagerank_attribution import PageRankAttribution
from captum_prxai.capture import CapturedGraph, capture_graph, check_memory
from captum_prxai.exceptions import PRXAIError

__all__ = ["LLMGraphAttribution", "DEFAULT_GEN_ARGS", "chat_input", "load_result", "save_result"]

#: The ``format`` field of a saved result (:func:`save_result`).
RESULT_FORMAT = "captum-prxai/generation-result"
RESULT_VERSION = 1

#: Memory budget (bytes) of the per-row edge maps held at once before PageRank runs on them;
#: ``internal_batch_size=None`` sizes the row chunks to it.
ROW_MAPS_BUDGET = 256 * 2**20
#: Memory budget (bytes) of the activations that one batched backward over a chunk of rows keeps (each row is one
#: copy of the sequence on the batch axis); ``internal_batch_size=None`` sizes the row chunks to it too.
ROW_BATCH_BUDGET = 2 * 2**30

# Hugging Face heads that are not language models: their logits are not next-token distributions.
_NOT_CAUSAL_LM = re.compile(
    r"For(SequenceClassification|TokenClassification|QuestionAnswering|MultipleChoice|MaskedLM|"
    r"NextSentencePrediction|PreTraining|ImageClassification|AudioClassification)$"
)


class LLMGraphAttribution(LLMGradientAttribution):
    r"""Explain text generation with PR-XAI, through Captum's LLM attribution API.

    A drop-in for :class:`captum.attr.LLMGradientAttribution` whose supported
    methods are the attention-graph attributions of captum-prxai
    (:class:`~captum_prxai.PRAttention`, :class:`~captum_prxai.PRGradient`,
    :class:`~captum_prxai.PRAttentionGradient`, any
    :class:`~captum_prxai.PageRankAttribution`, and the baselines
    :class:`~captum_prxai.RawAttention`, :class:`~captum_prxai.AttentionRollout`,
    :class:`~captum_prxai.GradientWeightedRollout`). It subclasses
    ``LLMGradientAttribution`` so that code testing for it, its target
    handling (``target=None`` generates with Captum's
    :data:`~captum.attr._core.llm_attr.DEFAULT_GEN_ARGS`, a string is encoded
    without special tokens) and its result type are Captum's own; only the
    attribution itself is replaced.

    Output token ``k`` is explained through ``log p(t_k | prompt, t_<k)``
    under teacher forcing, as in Captum: its row of ``token_attr`` is the
    wrapped method's scores with the model's input being the causal prefix
    ``prompt + t_<k`` and the explained position the one that predicts
    ``t_k``. For PageRank methods a row is the PageRank of the attention graph
    of that prefix, teleporting to that position; with one walk it is
    non-negative and sums to one over the whole prefix, so the prompt columns
    of a row sum to the share of its mass that reaches the prompt (the rest
    sits on earlier generated tokens, reported too with
    ``include_generated=True``). With two walks (``walks="both"``, the default
    of :class:`~captum_prxai.PageRankAttribution` on a causal LM: PR-TAG±
    (log-prob.), ``λ = 1``) a row is the positive walk's PageRank minus ``λ`` times the
    negative walk's: signed, summing to ``1 − λ`` (zero for the default).

    Attention-only edges come from one forward pass over ``prompt + t_0 ..
    t_{n-2}`` and need no backward at all; gradient edges need one
    vector-Jacobian product per output token, batched: a chunk of rows is one
    forward and one backward pass over one copy of the sequence per row (see
    ``docs/llm.md`` for the cost model). A BOS is put in front of a prompt
    whose tokenizer adds none (``add_bos``).

    Args:
        attr_method (AttentionGraphAttribution): A captum-prxai attention-graph
            attribution whose ``forward_func`` is the Hugging Face causal LM
            itself (e.g. ``PageRankAttribution(model, attention_layers(model))``,
            the decoder default PR-TAG± (log-prob.)), as Captum's LLM wrappers
            require. Every row explains the output token's log-probability,
            whatever the method's ``objective``.
        tokenizer: The model's tokenizer. :class:`~captum.attr.TextTemplateInput`
            needs a fast tokenizer (character offsets map template values to tokens).
        add_bos (bool or str): ``"auto"`` (default) puts the tokenizer's BOS
            in front of a prompt that does not start with a special token
            (SmolLM2's tokenizer adds none, and the decoder's attention-sink
            rule would otherwise silence the first word); ``True`` whenever the
            prompt does not start with the BOS; ``False`` never. The added BOS
            is in the model's input and the graph but has no column.
        model_name (str, optional): The model's name, recorded in the results
            (:func:`save_result`). Default: the config's ``_name_or_path``,
            else the model's class name.

    Examples::

        >>> from captum.attr import TextTokenInput
        >>> from captum_prxai import PageRankAttribution, attention_layers
        >>> from captum_prxai.llm import LLMGraphAttribution
        >>> llm_attr = LLMGraphAttribution(PageRankAttribution(model, attention_layers(model)), tokenizer)
        >>> result = llm_attr.attribute(TextTokenInput("The capital of France is", tokenizer), target=" Paris")
        >>> result.token_attr.shape  # (n_out, n_in)
        >>> fig, ax = result.plot_token_attr()

    References:
        A. Azarkhalili, Y. Li, M. W. Libbrecht. *PR-XAI: PageRank-Based
        Feature Attribution for Transformers.* ACL 2026.
        V. Miglani et al. *Using Captum to Explain Generative Language
        Models.* NLP-OSS 2023.
    """

    SUPPORTED_METHODS = (AttentionGraphAttribution,)
    SUPPORTED_INPUTS = (TextTokenInput, TextTemplateInput)

    def __init__(self, attr_method: AttentionGraphAttribution, tokenizer: Any, add_bos: Union[bool, str] = "auto",
                 model_name: Optional[str] = None) -> None:
        if not isinstance(attr_method, AttentionGraphAttribution):
            raise PRXAIError(
                f"LLMGraphAttribution wraps a captum-prxai attention-graph attribution (PRAttention, PRGradient, "
                f"PRAttentionGradient, PageRankAttribution, RawAttention, AttentionRollout, GradientWeightedRollout), "
                f"got {type(attr_method).__name__}. For Captum's own methods use captum.attr.LLMAttribution or "
                "LLMGradientAttribution."
            )
        model = attr_method.forward_func
        _check_causal_lm(model)
        if tokenizer is None or not callable(getattr(tokenizer, "encode", None)):
            raise PRXAIError("tokenizer must be the model's Hugging Face tokenizer (with encode/decode).")
        # Captum's LLMGradientAttribution.__init__ would replace the method's forward_func with its
        # per-token GradientForwardFunc; the shared base sets model, tokenizer and device only.
        BaseLLMAttribution.__init__(self, attr_method, tokenizer)
        self.attr_method = attr_method
        if add_bos not in ("auto", True, False):
            raise PRXAIError(f"add_bos must be 'auto', True or False, got {add_bos!r}.")
        self.add_bos = add_bos
        #: the model's name, recorded in saved results (:func:`save_result`); default: its config's ``_name_or_path``
        self.model_name = model_name or str(getattr(getattr(model, "config", None), "_name_or_path", "") or
                                            type(model).__name__)

    # -- the Captum entry point ------------------------------------------------------------------
    def attribute(  # type: ignore[override]
        self,
        inp: Union[TextTokenInput, TextTemplateInput],
        target: Union[str, Tensor, None] = None,
        gen_args: Optional[Dict[str, Any]] = None,
        include_generated: bool = False,
        one_pass: bool = True,
        internal_batch_size: Optional[int] = None,
        skip_special_tokens: Optional[bool] = None,
    ) -> Union[LLMAttributionResult, List[LLMAttributionResult]]:
        r"""Attribute every output token to the prompt's interpretable features.

        Args:
            inp (TextTokenInput, TextTemplateInput, or a list): The prompt,
                or a list of prompts (strings, TextTokenInput or
                TextTemplateInput) explained in one call: their continuations
                are generated in one left-padded ``generate`` call and the
                result is a list, one result per prompt. A prompt's
                interpretable features are the columns of the result: the
                tokens not in ``skip_tokens`` (:class:`~captum.attr.TextTokenInput`;
                skipped tokens stay in the model's input and in the graph, as
                in Captum, but get no column), or the template values
                (:class:`~captum.attr.TextTemplateInput`; a value's score is the
                sum of its tokens' scores, values sharing a ``mask`` id share
                their summed score, and the template's own text gets no column).
            target (str or Tensor, optional): The continuation to explain: a
                string (encoded without special tokens, as Captum does) or a
                1-D tensor of token ids. ``None`` generates it with
                ``model.generate(**gen_args)``. With a list of prompts: None
                or a list of targets, one per prompt. A target of special tokens
                only is refused. Default: None.
            gen_args (dict, optional): Generation arguments when
                ``target=None``; default Captum's ``DEFAULT_GEN_ARGS``
                (``max_new_tokens=25``, greedy). Must be None with a target.
            include_generated (bool): Also report the earlier generated tokens
                as sources: the result's ``input_tokens`` are the prompt's
                features followed by the output tokens, and row ``k`` scores
                ``t_0 .. t_{k-1}`` too (zero on ``t_k`` and later, which
                ``t_k`` cannot see). Not with a list of prompts. Default: False.
            one_pass (bool): ``True`` (default) computes every row from one
                forward pass; ``False`` runs the wrapped method's own
                ``attribute`` once per output token on its prefix (the
                per-token path Captum takes; same result, for checking and
                timing).
            internal_batch_size (int, optional): Output rows whose edge maps are
                held at once and solved as one PageRank batch. Default: as many
                as fit in about 256 MiB of maps.
            skip_special_tokens (bool, optional): Give the tokenizer's special
                tokens no column (they stay in the model's input and in the
                graph). ``None`` (default): skip them when the prompt holds a
                special token other than a leading BOS, i.e. the markers of a
                chat template (``apply_chat_template(..., tokenize=False)``);
                ``True``: always (the BOS too); ``False``: never.

        Returns:
            LLMAttributionResult (a list of them for a list of prompts): Captum's result with ``seq_attr``
            ``(n_in,)`` (the sum of the rows, as in Captum's
            ``LLMGradientAttribution``), ``token_attr`` ``(n_out, n_in)``,
            ``output_probs`` ``(n_out,)`` (``p(t_k | prompt, t_<k)`` under
            teacher forcing, from the same forward pass), ``input_tokens`` and
            ``output_tokens``.

        Raises:
            PRXAIError: Unsupported input type, empty prompt or target, a target
                that does not fit the model's context, ``gen_args`` with a
                target, ``target=None`` for a model that cannot generate, or a
                model that is not a causal LM.
        """
        if isinstance(inp, (list, tuple)):
            return self._attribute_batch(list(inp), target, gen_args, include_generated, one_pass,
                                         internal_batch_size, skip_special_tokens)
        if not isinstance(inp, self.SUPPORTED_INPUTS):
            raise PRXAIError(
                f"LLMGraphAttribution takes captum.attr.TextTokenInput or TextTemplateInput (or a list of them, or "
                f"of prompt strings, for a batch), got {type(inp).__name__}."
            )
        if target is not None and gen_args is not None:
            raise PRXAIError("gen_args is only used to generate the target; pass either target or gen_args, not both.")
        if internal_batch_size is not None and (isinstance(internal_batch_size, bool) or not isinstance(
                internal_batch_size, int) or internal_batch_size < 1):
            raise PRXAIError(f"internal_batch_size must be a positive int, got {internal_batch_size!r}.")

        if skip_special_tokens not in (None, True, False):
            raise PRXAIError(f"skip_special_tokens must be None, True or False, got {skip_special_tokens!r}.")
        # columns: (n_features, n_in) token -> feature, and the features' names
        prompt_ids, columns, input_tokens = self._prepare_prompt(inp, skip_special_tokens)
        n_in = prompt_ids.shape[1]
        target_ids = self._target_ids(inp, target, gen_args, prompt_ids)
        n_out = target_ids.shape[0]
        length = n_in + n_out - 1
        limit = max_input_length(getattr(self.model, "config", None))
        if limit is not None and length > limit:
            raise PRXAIError(
                f"The prompt ({n_in} tokens) and the target ({n_out} tokens) need a {length}-token input, but this "
                f"model accepts at most {limit}. Shorten the prompt or the target."
            )

        ids = torch.cat([prompt_ids, target_ids[:-1].unsqueeze(0)], dim=1)
        positions = torch.arange(n_in - 1, length, device=ids.device)  # position k predicts t_k
        if one_pass:
            scores, log_probs = self._rows_one_pass(ids, positions, target_ids, internal_batch_size)
        else:
            scores, log_probs = self._rows_per_token(ids, positions, target_ids)
        scores = scores.detach().to(torch.float32)
        self._warn_if_first_token_silenced(scores, int(prompt_ids[0, 0]))

        token_attr = scores[:, :n_in] @ columns.t().to(scores)
        if isinstance(inp, TextTemplateInput):
            token_attr = inp.format_attr(token_attr)
        output_tokens = _convert_ids_to_pretty_tokens(target_ids.cpu(), self.tokenizer)
        if include_generated:
            generated = torch.zeros(n_out, n_out, dtype=token_attr.dtype, device=token_attr.device)
            generated[:, : n_out - 1] = scores[:, n_in:]
            token_attr = torch.cat([token_attr, generated], dim=1)
            input_tokens = input_tokens + list(output_tokens)
        token_attr = token_attr.cpu()
        result = LLMAttributionResult(
            seq_attr=token_attr.sum(0),
            token_attr=token_attr,
            output_probs=log_probs.detach().exp().cpu(),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            inp=inp,
        )
        # what save_result records with the scores
        result.method = self.method_description()
        result.model_name = self.model_name
        return result

    def method_description(self) -> str:
        """The wrapped method, as a saved result records it: its class and, for PageRank methods, the resolved
        :class:`~captum_prxai.graph.spec.GraphSpec` that ran."""
        method = self._method()
        spec = getattr(method, "spec", None)
        return f"{type(method).__name__}({spec!r})" if spec is not None else type(method).__name__

    def _method(self) -> AttentionGraphAttribution:
        """The wrapped method as the rows run it: a PageRank method's ``"auto"`` options are resolved for
        generation (:meth:`~captum_prxai.PageRankAttribution.for_task`; options given explicitly are kept)."""
        method = self.attr_method
        return method.for_task("generation") if isinstance(method, PageRankAttribution) else method

    def attribute_future(self) -> Callable[[], LLMAttributionResult]:
        r"""Not implemented, as for Captum's ``LLMGradientAttribution``."""
        raise NotImplementedError("attribute_future is not implemented for LLMGraphAttribution")

    # -- inputs --------------------------------------------------------------------------------
    def _prompt_ids(self, inp: Union[TextTokenInput, TextTemplateInput]) -> Tensor:
        ids = self._format_model_input(inp.to_model_input())["input_ids"]
        if not isinstance(ids, Tensor) or ids.dim() != 2 or ids.shape[0] != 1:
            raise PRXAIError(
                f"The prompt must encode to token ids of shape (1, n), got {tuple(getattr(ids, 'shape', ()))}: one "
                "TextTokenInput holds one prompt. For a batch, pass a list: llm_attr.attribute([prompt_1, prompt_2, "
                "...]) with each prompt a string or its own TextTokenInput; it returns one result per prompt."
            )
        if ids.shape[1] == 0:
            raise PRXAIError("The prompt is empty: it encodes to no tokens. Give at least one token to explain from.")
        if inp.n_itp_features == 0:
            raise PRXAIError(
                "The prompt has no interpretable feature (every token is in skip_tokens, or the template has no "
                "values); nothing would get a score."
            )
        return ids.to(self.device)

    def _prepare_prompt(self, inp: Union[TextTokenInput, TextTemplateInput],
                        skip_special_tokens: Optional[bool] = None) -> tuple[Tensor, Tensor, List[str]]:
        """``(1, n_in)`` prompt ids (with the BOS that :meth:`_needs_bos` adds), the ``(n_features, n_in)`` columns
        and the features' names."""
        prompt_ids = self._prompt_ids(inp)
        text = inp.to_model_input()
        self._check_generation_prompt(text if isinstance(text, str) else self.tokenizer.decode(prompt_ids[0].tolist()))
        columns = self._feature_matrix(inp, prompt_ids)
        names = list(inp.values)
        if isinstance(inp, TextTokenInput):
            columns, names = self._without_special_tokens(columns, names, prompt_ids[0], skip_special_tokens)
        if self._needs_bos(prompt_ids):  # a BOS the tokenizer did not add: in the graph, no column of its own
            bos = torch.full((1, 1), int(self.tokenizer.bos_token_id), dtype=prompt_ids.dtype, device=prompt_ids.device)
            prompt_ids = torch.cat([bos, prompt_ids], dim=1)
            columns = torch.nn.functional.pad(columns, (1, 0))
        return prompt_ids, columns, names

    def _without_special_tokens(self, columns: Tensor, names: List[str], ids: Tensor,
                                skip: Optional[bool]) -> tuple[Tensor, List[str]]:
        """Drop the columns of special tokens (``skip_special_tokens``, see :meth:`attribute`)."""
        special = set(getattr(self.tokenizer, "all_special_ids", None) or ())
        is_special = torch.tensor([int(i) in special for i in ids.tolist()], device=columns.device)
        if skip is None:
            bos = getattr(self.tokenizer, "bos_token_id", None)
            beyond_bos = is_special.clone()
            if bos is not None and int(ids[0]) == int(bos):
                beyond_bos[0] = False
            skip = bool(beyond_bos.any())
        if not skip:
            return columns, names
        token_of = columns.argmax(-1)  # each TextTokenInput feature is one token
        keep = ~is_special[token_of]
        if not bool(keep.any()):
            raise PRXAIError("Every feature of the prompt is a special token; with skip_special_tokens nothing "
                             "would get a score. Pass skip_special_tokens=False.")
        return columns[keep], [name for name, k in zip(names, keep.tolist()) if k]

    def _attribute_batch(self, prompts: list, targets: Any, gen_args: Optional[Dict[str, Any]],
                         include_generated: bool, one_pass: bool, internal_batch_size: Optional[int],
                         skip_special_tokens: Optional[bool]) -> List[LLMAttributionResult]:
        """:meth:`attribute` for a list of prompts: the continuations generated in one left-padded ``generate``
        call (``targets=None``), then one result per prompt."""
        if not prompts:
            raise PRXAIError("The batch of prompts is empty; give at least one prompt.")
        if include_generated:
            raise PRXAIError(
                "include_generated=True is not supported with a batch of prompts (each result would have its own "
                "columns); explain the prompts one at a time for it."
            )
        inputs = []
        for i, prompt in enumerate(prompts):
            if isinstance(prompt, str):
                if not prompt.strip():
                    raise PRXAIError(f"Prompt {i} of the batch is empty; every prompt needs at least one token.")
                prompt = TextTokenInput(prompt, self.tokenizer)
            if not isinstance(prompt, self.SUPPORTED_INPUTS):
                raise PRXAIError(f"Prompt {i} of the batch must be a string, TextTokenInput or TextTemplateInput, got "
                                 f"{type(prompt).__name__}.")
            inputs.append(prompt)
        if targets is None:
            targets = self._generate_batch(inputs, gen_args, skip_special_tokens)
        elif gen_args is not None:
            raise PRXAIError("gen_args is only used to generate the targets; pass either targets or gen_args.")
        elif not isinstance(targets, (list, tuple)) or len(targets) != len(inputs):
            raise PRXAIError(f"With a batch of {len(inputs)} prompts, target must be None or a list of "
                             f"{len(inputs)} targets (strings or token-id tensors), got {type(targets).__name__}"
                             f"{' of length ' + str(len(targets)) if isinstance(targets, (list, tuple)) else ''}.")
        results = []
        for i, (prompt, target) in enumerate(zip(inputs, targets)):
            try:
                results.append(self.attribute(prompt, target=target, one_pass=one_pass,
                                              internal_batch_size=internal_batch_size,
                                              skip_special_tokens=skip_special_tokens))
            except PRXAIError as error:
                raise PRXAIError(f"Prompt {i} of the batch: {error}") from None
        return results

    def _generate_batch(self, inputs: list, gen_args: Optional[Dict[str, Any]],
                        skip_special_tokens: Optional[bool]) -> List[Tensor]:
        """Each prompt's continuation, from one ``generate`` call over the left-padded prompts; a continuation
        ends at its first EOS (the padding after it is dropped)."""
        if not callable(getattr(self.model, "generate", None)):
            raise PRXAIError(f"target=None generates the continuations, but {type(self.model).__name__} has no "
                             "generate() method. Pass the targets.")
        prompt_ids = []
        for i, inp in enumerate(inputs):
            try:
                prompt_ids.append(self._prepare_prompt(inp, skip_special_tokens)[0][0])
            except PRXAIError as error:
                raise PRXAIError(f"Prompt {i} of the batch: {error}") from None
        eos = getattr(self.tokenizer, "eos_token_id", None)
        pad = getattr(self.tokenizer, "pad_token_id", None)
        pad = eos if pad is None else pad
        if pad is None:
            raise PRXAIError("A batch of prompts is left-padded, but the tokenizer has no pad or EOS token.")
        width = max(len(ids) for ids in prompt_ids)
        batch = torch.full((len(prompt_ids), width), int(pad), dtype=torch.long, device=self.device)
        mask = torch.zeros_like(batch)
        for b, ids in enumerate(prompt_ids):
            batch[b, width - len(ids):] = ids
            mask[b, width - len(ids):] = 1
        args = dict(gen_args or DEFAULT_GEN_ARGS)
        args.setdefault("pad_token_id", int(pad))
        with torch.no_grad():
            generated = self.model.generate(input_ids=batch, attention_mask=mask, **args)[:, width:]
        targets = []
        for b, ids in enumerate(generated):
            if eos is not None and bool((ids == eos).any()):
                ids = ids[: int((ids == eos).nonzero()[0, 0]) + 1]
            if ids.numel() == 0:
                raise PRXAIError(f"Prompt {b} of the batch: generate() produced no new token; pass the targets.")
            targets.append(ids)
        return targets

    def _needs_bos(self, prompt_ids: Tensor) -> bool:
        """Whether to put the tokenizer's BOS in front of the prompt (``add_bos``; ``"auto"``: the tokenizer has a
        BOS token and the prompt does not start with a special token, e.g. SmolLM2's, which adds none)."""
        bos = getattr(self.tokenizer, "bos_token_id", None)
        if self.add_bos is False or bos is None or int(prompt_ids[0, 0]) == int(bos):
            return False
        if self.add_bos is True:
            return True
        return int(prompt_ids[0, 0]) not in set(getattr(self.tokenizer, "all_special_ids", None) or ())

    def _check_generation_prompt(self, text: Any) -> None:
        """Refuse a chat-template prompt that ends with a finished turn (no generation prompt after it)."""
        end = _end_of_turn(self.tokenizer)
        if end and isinstance(text, str) and text.rstrip().endswith(end):
            raise PRXAIError(
                f"The prompt ends with the chat template's end of turn {end!r}: it has no generation prompt, so "
                "the model is not asked to answer. Build it with tokenizer.apply_chat_template(messages, "
                "tokenize=False, add_generation_prompt=True), or with captum_prxai.llm.chat_input."
            )

    def _feature_matrix(self, inp: Union[TextTokenInput, TextTemplateInput], prompt_ids: Tensor) -> Tensor:
        """``(n_itp_features, n_in)`` 0/1 matrix: which prompt tokens make up each interpretable feature."""
        n_in = prompt_ids.shape[1]
        if isinstance(inp, TextTokenInput):
            keep = torch.ones(n_in, dtype=torch.bool) if inp.itp_mask is None else inp.itp_mask[0].bool().cpu()
            index = torch.nonzero(keep).squeeze(1)
            matrix = torch.zeros(len(index), n_in)
            matrix[torch.arange(len(index)), index] = 1.0
            return matrix.to(self.device)
        return _template_feature_matrix(inp, self.tokenizer, prompt_ids[0].tolist()).to(self.device)

    def _target_ids(
        self, inp: Any, target: Union[str, Tensor, None], gen_args: Optional[Dict[str, Any]], prompt_ids: Tensor
    ) -> Tensor:
        if target is None:
            if not callable(getattr(self.model, "generate", None)):
                raise PRXAIError(
                    f"target=None generates the continuation, but {type(self.model).__name__} has no generate() "
                    "method. Pass the target text or token ids."
                )
            model_input = {"input_ids": prompt_ids, "attention_mask": torch.ones_like(prompt_ids)}
            args = dict(gen_args or DEFAULT_GEN_ARGS)
            if getattr(self.tokenizer, "pad_token_id", None) is None and getattr(self.tokenizer, "eos_token_id", None) is not None:
                args.setdefault("pad_token_id", self.tokenizer.eos_token_id)
            with torch.no_grad():
                generated = self.model.generate(**model_input, **args)
            ids = generated[0, prompt_ids.shape[1]:]
            if ids.numel() == 0:
                raise PRXAIError("generate() produced no new token; pass a target or other gen_args.")
            return ids.to(self.device)
        if isinstance(target, str):
            ids = torch.tensor(self.tokenizer.encode(target, add_special_tokens=False), dtype=torch.long)
            if ids.numel() == 0:
                raise PRXAIError(f"The target {target!r} encodes to no tokens; give a non-empty continuation.")
        elif isinstance(target, Tensor):
            if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool:
                raise PRXAIError(f"A target tensor must hold integer token ids, got dtype {target.dtype}.")
            if target.dim() == 2 and target.shape[0] == 1:
                target = target[0]
            if target.dim() != 1:
                raise PRXAIError(f"A target tensor must be 1-D token ids (n_out,), got shape {tuple(target.shape)}.")
            if target.numel() == 0:
                raise PRXAIError("The target tensor is empty; give at least one token id.")
            ids = target.long()
        else:
            raise PRXAIError(f"target must be None, a string or a tensor of token ids, got {type(target).__name__}.")
        special = set(getattr(self.tokenizer, "all_special_ids", None) or ())
        if special and all(int(i) in special for i in ids.tolist()):
            raise PRXAIError(
                f"The target holds only special tokens ({self.tokenizer.convert_ids_to_tokens(ids.tolist())}), "
                "which explain nothing about the text; give a continuation with at least one real token."
            )
        vocab = _vocab_size(self.model)
        if vocab is not None and ((ids < 0).any() or (ids >= vocab).any()):
            bad = ids[(ids < 0) | (ids >= vocab)][0].item()
            raise PRXAIError(f"Target token id {bad} is outside the model's vocabulary (0..{vocab - 1}).")
        return ids.to(self.device)

    # -- the model -----------------------------------------------------------------------------
    def _last_logits(self, input_ids: Tensor, keep: int) -> Tensor:
        """``(B, keep, V)`` logits of the last ``keep`` positions of a forward pass over unpadded ids.

        Models whose forward takes ``logits_to_keep`` (Llama, Qwen, Gemma, ...) apply the LM head to those
        positions only.
        """
        kwargs: Dict[str, Any] = {"attention_mask": torch.ones_like(input_ids), "use_cache": False}
        if _accepts(self.model, "logits_to_keep"):
            kwargs["logits_to_keep"] = keep
        output = self.model(input_ids=input_ids, **kwargs)
        logits = getattr(output, "logits", output)
        if isinstance(logits, (tuple, list)):
            logits = logits[0]
        if isinstance(logits, Tensor) and logits.dim() == 4:  # (B, 1, T, V), as Captum handles for Llama 4
            logits = logits[:, 0]
        if (not isinstance(logits, Tensor) or logits.dim() != 3 or logits.shape[0] != input_ids.shape[0]
                or logits.shape[1] not in (keep, input_ids.shape[1])):
            raise PRXAIError(
                f"{type(self.model).__name__} returned logits of shape {tuple(getattr(logits, 'shape', ()))}, not "
                f"(1, {input_ids.shape[1]}, vocab): LLMGraphAttribution needs a causal language model "
                "(e.g. AutoModelForCausalLM)."
            )
        return logits[:, -keep:]

    # -- the rows --------------------------------------------------------------------------------
    def _rows_one_pass(
        self, ids: Tensor, positions: Tensor, target_ids: Tensor, internal_batch_size: Optional[int]
    ) -> tuple[Tensor, Tensor]:
        """``(n_out, T)`` scores and ``(n_out,)`` target log-probabilities.

        Attention-only edges: one forward pass, every row read from the same maps. Gradient edges: the rows are
        cut into chunks of ``R`` rows (:meth:`_row_chunk`); each chunk is one forward and one backward pass over
        ``R`` copies of the sequence (up to the chunk's last explained position), copy ``r`` explaining row
        ``r``'s log-probability, through the method's own capture (:func:`~captum_prxai.capture.capture_graph`,
        with its ``propagation``, ``layer_term`` and input gradient), so that the ``R`` vector-Jacobian
        products of a chunk run as one batched backward.
        """
        method = self._method()
        length = ids.shape[1]
        n_out = positions.shape[0]
        with_gradients = method._needs_gradients()
        if with_gradients and torch.is_inference_mode_enabled():
            raise PRXAIError(
                "attribute() was called under torch.inference_mode(), which forbids the backward passes that "
                "gradient-based edges need; call it outside inference_mode (PR-A needs no gradients)."
            )
        if not with_gradients:
            return self._rows_attention_only(ids, positions, target_ids, internal_batch_size)
        chunk = internal_batch_size or self._row_chunk(length, n_out)
        # every row explains its token's log-probability (the forward returns log-probabilities, so "output" is
        # that), whatever the method's objective; the propagation is the method's own
        propagation = method._backward_options()[1]
        rows, log_probs = [], []
        for start in range(0, n_out, chunk):
            part = positions[start:start + chunk]
            count, end = part.shape[0], int(part[-1]) + 1
            copies = ids[:, :end].expand(count, -1)
            prefix = torch.arange(end, device=ids.device)[None, :] <= part[:, None]  # (R, end)
            check_memory(method.layers, count, end, ids.device, method.capture, method.attention_fn,
                         summed=method._layer_term() is not None)
            graph = capture_graph(
                self._row_forward(part), method.layers, copies, prefix, method._layer_map,
                targets=target_ids[start:start + chunk], with_gradients=True,
                input_gradient=method._needs_input_gradient(), attention_fn=method.attention_fn,
                capture=method.capture, target_position="last", layer_term=method._layer_term(),
                objective="output", propagation=propagation,
            )
            self._check_causal([graph.causal])
            scores = method._token_scores(graph) * prefix
            rows.append(torch.nn.functional.pad(scores, (0, length - end)))
            log_probs.append(graph.logits.gather(1, target_ids[start:start + chunk, None]).squeeze(1))
        return torch.cat(rows), torch.cat(log_probs)

    def _row_forward(self, part: Tensor) -> Callable[[Tensor], Tensor]:
        """The forward function of a chunk of rows: ``(R, T')`` copies -> ``(R, V)`` log-probabilities, copy ``r``
        read at position ``part[r]``."""
        keep = int(part[-1] - part[0]) + 1

        def forward(input_ids: Tensor) -> Tensor:
            logits = self._last_logits(input_ids, keep)  # positions part[0] .. part[-1]
            picked = logits[torch.arange(input_ids.shape[0], device=input_ids.device), part - part[0]]
            return torch.log_softmax(picked.float(), dim=-1)

        return forward

    def _row_chunk(self, length: int, n_out: int) -> int:
        """Rows per batched backward: as many as keep the chunk's activations within :data:`ROW_BATCH_BUDGET`
        and its edge maps within :data:`ROW_MAPS_BUDGET`."""
        method = self._method()
        kept = 1 if method._layer_term() is not None else len(method.layers)
        maps = 4 * (kept + 3) * length * length
        config = getattr(self.model, "config", None)
        hidden = getattr(config, "hidden_size", None) or 1024
        inner = getattr(config, "intermediate_size", None) or 4 * hidden
        per_token = 4 * (10 * hidden + 4 * inner) * len(method.layers)  # activations autograd keeps, per token
        rows = min(ROW_MAPS_BUDGET // max(maps, 1), ROW_BATCH_BUDGET // max(per_token * length, 1))
        return max(1, min(n_out, rows))

    def _rows_attention_only(self, ids: Tensor, positions: Tensor, target_ids: Tensor,
                             internal_batch_size: Optional[int]) -> tuple[Tensor, Tensor]:
        """Attention-only edges: one forward pass over the whole sequence; row ``r`` is its causal prefix."""
        method = self._method()
        length, n_out = ids.shape[1], positions.shape[0]
        stash: dict[str, Tensor] = {}

        def forward(input_ids: Tensor) -> Tensor:
            stash["log_probs"] = torch.log_softmax(self._last_logits(input_ids, n_out)[0].float(), dim=-1)
            return stash["log_probs"][-1:]

        check_memory(method.layers, 1, length, ids.device, method.capture, method.attention_fn)
        full = torch.ones(1, length, dtype=torch.bool, device=ids.device)
        graph = capture_graph(forward, method.layers, ids, full, method._layer_map, with_gradients=False,
                              attention_fn=method.attention_fn, capture=method.capture, target_position="last")
        self._check_causal([graph.causal])
        maps = [m.to(torch.float32) if m.dtype in (torch.float16, torch.bfloat16) else m for m in graph.maps]
        chunk = internal_batch_size or max(1, ROW_MAPS_BUDGET // (4 * len(maps) * length * length))
        rows = []
        for start in range(0, n_out, chunk):
            part = positions[start:start + chunk]
            rows.append(self._score_rows([m.expand(len(part), -1, -1) for m in maps], part, None))
        log_probs = stash["log_probs"][torch.arange(n_out, device=ids.device), target_ids]
        return torch.cat(rows), log_probs

    def _score_rows(self, maps: list[Tensor], positions: Tensor, input_gradient: Optional[Tensor]) -> Tensor:
        """Scores of a batch of rows: row ``r``'s graph is the causal prefix ending at ``positions[r]``."""
        length = maps[0].shape[-1]
        prefix = torch.arange(length, device=positions.device)[None, :] <= positions[:, None]  # (R, T)
        maps = [m * prefix[:, None, :] * prefix[:, :, None] for m in maps]
        if input_gradient is not None:
            input_gradient = input_gradient * prefix
        graph = CapturedGraph(maps=maps, mask=prefix, target_position=positions, causal=True,
                              input_gradient=input_gradient)
        return self._method()._token_scores(graph) * prefix

    def _rows_per_token(self, ids: Tensor, positions: Tensor, target_ids: Tensor) -> tuple[Tensor, Tensor]:
        """The per-token path: the wrapped method's own ``attribute`` on each prefix, one pass per output token."""
        method = copy(self._method())
        method.target_position = "last"

        def forward(input_ids: Tensor) -> Tensor:
            return torch.log_softmax(self._last_logits(input_ids, 1)[:, -1].float(), dim=-1)

        method.forward_func = forward
        length = ids.shape[1]
        rows, log_probs = [], []
        for k, position in enumerate(positions.tolist()):
            prefix = ids[:, : position + 1]
            scores = method.attribute(prefix, target=int(target_ids[k]))
            rows.append(torch.nn.functional.pad(scores.detach(), (0, length - prefix.shape[1])))
            with torch.no_grad():
                log_probs.append(forward(prefix)[0, target_ids[k]])
        return torch.cat(rows), torch.stack(log_probs)

    def _warn_if_first_token_silenced(self, scores: Tensor, first_id: int) -> None:
        """Say so when the sink rule left a real (non-special) first token with exactly zero in every row."""
        special = set(getattr(self.tokenizer, "all_special_ids", None) or ())
        if first_id in special or scores.shape[1] < 2 or bool((scores[:, 0] != 0).any()):
            return
        name = self.tokenizer.convert_ids_to_tokens([first_id])[0] if hasattr(self.tokenizer, "convert_ids_to_tokens") else first_id
        warnings.warn(
            f"The first prompt token {name!r} is a real token, not a BOS/special token, and scores exactly 0 in every "
            "row: the decoder's attention-sink rule (sink='auto' drops the edges into the first token) removed all "
            "its in-edges. Start the prompt with the tokenizer's BOS token (e.g. a chat template), or build the "
            "method with sink='keep'.",
            stacklevel=3,
        )

    def _check_causal(self, causal_flags: list[bool]) -> None:
        if causal_flags and not causal_flags[0]:
            raise PRXAIError(
                f"The attention of {type(self.model).__name__} is not causal: tokens attend to later tokens, so "
                "this is not a left-to-right language model and its generation cannot be explained token by token."
            )


# -- helpers ----------------------------------------------------------------------------------------


def _check_causal_lm(model: Any) -> None:
    if not isinstance(model, nn.Module):
        raise PRXAIError(
            f"The wrapped method's forward_func must be the Hugging Face causal LM itself (an nn.Module), got "
            f"{type(model).__name__}; build it as e.g. PageRankAttribution(model, attention_layers(model))."
        )
    name = type(model).__name__
    config = getattr(model, "config", None)
    if _NOT_CAUSAL_LM.search(name):
        raise PRXAIError(
            f"{name} is not a causal language model, so it has no next-token distribution to explain. Load the "
            "model with transformers.AutoModelForCausalLM (e.g. GPT-2, Llama, Qwen, Gemma, SmolLM2)."
        )
    if config is not None and getattr(config, "is_encoder_decoder", False):
        raise PRXAIError(
            f"{name} is an encoder-decoder model; LLMGraphAttribution explains decoder-only causal LMs "
            "(AutoModelForCausalLM)."
        )


def _accepts(model: nn.Module, name: str) -> bool:
    """Whether ``model.forward`` takes the keyword ``name``."""
    try:
        return name in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def _vocab_size(model: nn.Module) -> Optional[int]:
    embeddings = model.get_input_embeddings() if callable(getattr(model, "get_input_embeddings", None)) else None
    weight = getattr(embeddings, "weight", None)
    if isinstance(weight, Tensor):
        return int(weight.shape[0])
    size = getattr(getattr(model, "config", None), "vocab_size", None)
    return int(size) if isinstance(size, int) else None


def chat_input(messages: List[Dict[str, str]], tokenizer: Any, add_generation_prompt: bool = True,
               roles: tuple = ("user",), per_token: bool = True) -> TextTemplateInput:
    r"""A chat prompt as Captum's :class:`~captum.attr.TextTemplateInput`: the chat template is its template, the
    contents of the messages of ``roles`` its values.

    So :meth:`LLMGraphAttribution.attribute` gives a column to each token of those messages (or, with
    ``per_token=False``, one to each message: the sum of its tokens' scores) and none to the template's tokens
    (role names, turn markers, a default system prompt); they stay in the model's input and in the graph.

    Args:
        messages (list of dict): ``[{"role": ..., "content": ...}, ...]``, as for ``apply_chat_template``.
        tokenizer: The model's tokenizer, with a chat template.
        add_generation_prompt (bool): Must be True: without the generation prompt the model is not asked to
            answer, and the prompt is refused.
        roles (tuple of str): The roles whose contents are values (columns). Default: ``("user",)``.
        per_token (bool): One value per token of a content (its piece of text), or one per message. Default: True.

    Returns:
        TextTemplateInput: formats to ``tokenizer.apply_chat_template(messages, tokenize=False,
        add_generation_prompt=True)``.

    Examples::

        >>> inp = chat_input([{"role": "user", "content": "What is the capital of France?"}], tokenizer)
        >>> result = LLMGraphAttribution(method, tokenizer).attribute(inp)
    """
    if not getattr(tokenizer, "chat_template", None):
        raise PRXAIError("The tokenizer has no chat template; build a TextTokenInput from the prompt text instead.")
    if not add_generation_prompt:
        raise PRXAIError(
            "chat_input needs add_generation_prompt=True: a chat prompt that ends with a finished turn has no "
            "generation prompt, so the model is not asked to answer."
        )
    if not isinstance(messages, (list, tuple)) or not all(isinstance(m, dict) and "content" in m for m in messages):
        raise PRXAIError("messages must be a list of {'role': ..., 'content': ...} dicts.")
    sentinels, values, rendered = {}, [], []
    for message in messages:
        if message.get("role") in roles and str(message["content"]).strip():
            sentinels[len(values)] = f"\ue000{len(values)}\ue001"
            rendered.append({**message, "content": sentinels[len(values)]})
            values.append(str(message["content"]))
        else:
            rendered.append(message)
    if not values:
        raise PRXAIError(f"No message of the roles {roles} has content; nothing would get a column.")
    text = tokenizer.apply_chat_template(rendered, tokenize=False, add_generation_prompt=True)
    template = text.replace("{", "{{").replace("}", "}}")
    pieces: List[str] = []
    for index, sentinel in sentinels.items():
        if template.count(sentinel) != 1:
            raise PRXAIError("The chat template does not insert each message's content exactly once; build the "
                             "prompt with apply_chat_template and a TextTokenInput instead.")
        parts = _token_pieces(values[index], tokenizer) if per_token else [values[index]]
        fields = "".join("{" + str(len(pieces) + i) + "}" for i in range(len(parts)))
        template = template.replace(sentinel, fields)
        pieces.extend(parts)
    return TextTemplateInput(template, pieces)


def _token_pieces(content: str, tokenizer: Any) -> List[str]:
    """``content`` cut where its own tokens start (a fast tokenizer's offsets); the pieces join to ``content``."""
    if not getattr(tokenizer, "is_fast", False):
        return [content]
    offsets = tokenizer(content, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    starts = sorted({0} | {start for start, end in offsets if end > start and 0 < start < len(content)})
    return [content[a:b] for a, b in zip(starts, starts[1:] + [len(content)])]


def save_result(result: LLMAttributionResult, path: Union[str, "os.PathLike[str]"], method: Optional[str] = None,
                model_name: Optional[str] = None) -> None:
    r"""Save a generation explanation to one JSON file, readable without the model (:func:`load_result`).

    The file holds the input and output tokens, ``token_attr`` ``(n_out, n_in)``, ``seq_attr``, ``output_probs``,
    the method and the model's name, and the format's name and version.

    Args:
        result (LLMAttributionResult): A result of :meth:`LLMGraphAttribution.attribute` (or any Captum LLM
            result with a ``token_attr``).
        path (str or path): The ``.json`` file to write.
        method (str, optional): The method's name; default: the one the result records (``result.method``).
        model_name (str, optional): The model's name; default: ``result.model_name``.

    Raises:
        PRXAIError: The result has no token matrix, or no method or model name is known.
    """
    if not isinstance(result, LLMAttributionResult) or result.token_attr is None:
        raise PRXAIError("save_result takes an LLMAttributionResult with a token_attr matrix (LLMGraphAttribution's "
                         f"result), got {type(result).__name__}.")
    method = method or getattr(result, "method", None)
    model_name = model_name or getattr(result, "model_name", None)
    if not method or not model_name:
        raise PRXAIError("The result records no method or model name; pass save_result(result, path, method=..., "
                         "model_name=...).")
    token_attr = torch.as_tensor(result.token_attr).detach().cpu().double()
    payload = {
        "format": RESULT_FORMAT,
        "version": RESULT_VERSION,
        "method": str(method),
        "model": str(model_name),
        "input_tokens": [str(t) for t in result.input_tokens],
        "output_tokens": [str(t) for t in result.output_tokens],
        "token_attr": token_attr.tolist(),
        "seq_attr": torch.as_tensor(result.seq_attr).detach().cpu().double().tolist(),
        "output_probs": None if result.output_probs is None
        else torch.as_tensor(result.output_probs).detach().cpu().double().tolist(),
    }
    Path(path).write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")


def load_result(path: Union[str, "os.PathLike[str]"]) -> LLMAttributionResult:
    r"""Read a result that :func:`save_result` wrote, without the model.

    Returns:
        LLMAttributionResult: Captum's result (``token_attr``, ``seq_attr``, ``output_probs``, the tokens; no
        ``inp``), with ``method`` and ``model_name`` attributes. Captum's ``plot_token_attr()`` draws it.

    Raises:
        PRXAIError: The file is missing, not JSON, not a saved result, or of a newer version.
    """
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PRXAIError(f"No such file: {path}") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise PRXAIError(f"{path} is not a saved generation result (not readable JSON: {error}).") from None
    if not isinstance(payload, dict) or payload.get("format") != RESULT_FORMAT:
        raise PRXAIError(f"{path} is not a saved generation result (no format {RESULT_FORMAT!r}).")
    if not isinstance(payload.get("version"), int) or payload["version"] > RESULT_VERSION:
        raise PRXAIError(f"{path} is of format version {payload.get('version')!r}; this captum-prxai reads up to "
                         f"{RESULT_VERSION}. Upgrade captum-prxai.")
    try:
        token_attr = torch.tensor(payload["token_attr"], dtype=torch.float64)
        result = LLMAttributionResult(
            input_tokens=list(payload["input_tokens"]), output_tokens=list(payload["output_tokens"]),
            seq_attr=torch.tensor(payload["seq_attr"], dtype=torch.float64), token_attr=token_attr,
            output_probs=None if payload.get("output_probs") is None
            else torch.tensor(payload["output_probs"], dtype=torch.float64),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise PRXAIError(f"{path} is a damaged generation result ({type(error).__name__}: {error}).") from None
    if token_attr.dim() != 2 or token_attr.shape != (len(result.output_tokens), len(result.input_tokens)):
        raise PRXAIError(f"{path} is a damaged generation result: token_attr has shape {tuple(token_attr.shape)}, "
                         f"not (outputs, inputs) = ({len(result.output_tokens)}, {len(result.input_tokens)}).")
    result.method = payload.get("method")
    result.model_name = payload.get("model")
    return result


def _end_of_turn(tokenizer: Any) -> str:
    """The text a chat template puts after a user turn (e.g. ``"<|im_end|>"``), stripped; ``""`` without a
    template."""
    if not getattr(tokenizer, "chat_template", None) or not callable(getattr(tokenizer, "apply_chat_template", None)):
        return ""
    marker = "\ue000prxai\ue001"
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": marker}], tokenize=False)
    except Exception:  # a template that needs other messages: no check
        return ""
    return text.split(marker, 1)[1].strip() if isinstance(text, str) and marker in text else ""


_SENTINEL = re.compile("\ue000(\\d+)\ue001")


def _template_feature_matrix(inp: TextTemplateInput, tokenizer: Any, prompt_ids: List[int]) -> Tensor:
    """``(n_itp_features, n_tokens)``: which tokens of a template's text belong to each interpretable feature.

    The template is formatted with sentinel strings to find where each value
    lands in the text; a token belongs to the value whose characters it
    overlaps (the first one, if a token spans two values). Tokens of the
    template's own text belong to no feature.
    """
    sentinels = [f"\ue000{i}\ue001" for i in range(inp.n_features)]
    skeleton = inp.format_fn(**dict(zip(inp.dict_keys, sentinels))) if inp.dict_keys else inp.format_fn(*sentinels)
    spans: list[Optional[tuple[int, int]]] = [None] * inp.n_features
    pieces, cursor, offset = [], 0, 0
    for match in _SENTINEL.finditer(skeleton):
        index = int(match.group(1))
        if index >= inp.n_features or spans[index] is not None:
            raise PRXAIError("Each value of a TextTemplateInput must appear exactly once in the formatted template.")
        literal = skeleton[cursor:match.start()]
        pieces.append(literal)
        offset += len(literal)
        value = inp.values[index]
        spans[index] = (offset, offset + len(value))
        pieces.append(value)
        offset += len(value)
        cursor = match.end()
    pieces.append(skeleton[cursor:])
    text = "".join(pieces)
    missing = [inp.values[i] for i, span in enumerate(spans) if span is None]
    if missing or text != inp.to_model_input():
        raise PRXAIError(
            "Could not locate the TextTemplateInput values in the formatted prompt (each value must be inserted "
            f"verbatim, exactly once){'; missing: ' + repr(missing) if missing else ''}."
        )
    if not getattr(tokenizer, "is_fast", False):
        raise PRXAIError("TextTemplateInput needs a fast tokenizer (with offset mapping) to map values to tokens.")
    encoded = tokenizer(text, return_offsets_mapping=True, add_special_tokens=True)
    if list(encoded["input_ids"]) != list(prompt_ids):
        raise PRXAIError("The tokenizer's offset mapping does not match the prompt's encoding; cannot map values to tokens.")
    group = inp.formatted_mask if inp.mask else list(range(inp.n_features))
    matrix = torch.zeros(inp.n_itp_features, len(prompt_ids))
    order = sorted(range(inp.n_features), key=lambda i: spans[i])  # type: ignore[arg-type,return-value]
    for position, (start, end) in enumerate(encoded["offset_mapping"]):
        if end <= start:
            continue  # special tokens carry no characters
        for i in order:
            low, high = spans[i]  # type: ignore[misc]
            if start < high and end > low:
                matrix[group[i], position] = 1.0
                break
    return matrix
