"""ferret's side of the cross-check: ferret's own AOPC comprehensiveness and sufficiency on our scores.

Runs in the separate ferret venv (``ferret-xai==0.4.2``; see README.md). Reads ``examples.jsonl``
written by ``export_cell.py`` (text, our ``input_ids``, the explained ``target`` and every method's
per-token scores) and the exported model, and for every (example, method) builds a ferret
``Explanation(text, tokens, scores, explainer, target)`` from OUR scores and calls
``AOPC_Comprehensiveness_Evaluation`` / ``AOPC_Sufficiency_Evaluation.compute_evaluation``.

Variants (``--variants``, comma-separated):
  default   ferret's defaults: remove_first_last=True (drop [CLS]/[SEP]), only_pos=True (only tokens
            with a positive score are ever removed), removal_args = {remove_tokens: True (delete),
            based_on: "perc", thresholds: 0.1, 0.2, ..., 1.0}.
  allsigns  as default but only_pos=False (every token may be removed, as in our metrics).
  eraser    only_pos=False and thresholds = our ERASER bins 0.01, 0.05, 0.1, 0.2, 0.5.
  protected as eraser, and a decoder's explained last token (``explained_position``) is kept in every
            perturbed input, as our decoder metrics keep it: ferret has no protected positions, so its
            score is set below every other score for comprehensiveness (never among the removed top-k)
            and above every other for sufficiency (always among the kept top-k). Still different from
            ours: ferret counts k = floor(f * n) over all n tokens, the protected one included, where
            ours rounds over the n - 1 others; and ferret's sufficiency keeps k - 1 tokens besides it.
            Encoder rows (no explained position) skip it.
ferret 0.4.2 fails with only_pos=False (``id_top_k == []`` on a numpy array); the script replaces its
``_get_id_tokens_top_k`` by the same selection returned as a list (only_pos=True is unchanged).
For a tokenizer that adds no special tokens (SmolLM2) every variant uses remove_first_last=False:
ferret's default would drop the first and last real tokens while keeping all the scores (it only
slices the scores when tokens[0] is the tokenizer's cls_token), misaligning ids and scores.

Checks, per example: ferret's tokenisation of the text (``helper._tokenize``: truncation=True at the
tokenizer's model_max_length) must give exactly our ``input_ids``; the model's probability of the
target under ferret's forward must match ours. Per evaluation it also records how many of the texts
ferret builds (it decodes the perturbed ids to a string and re-tokenises that string) tokenise back
to different ids than the ones intended.

Writes ``--out`` (JSON Lines): one line per (example, method, variant) with ``comprehensiveness``,
``sufficiency``, the number of distinct removal levels used, and the re-tokenisation mismatch counts.
"""
import argparse
import json
import time

import numpy as np
import torch

torch.set_num_threads(1)

import ferret.evaluators.utils_from_soft_to_discrete as discrete
from ferret.evaluators.faithfulness_measures import AOPC_Comprehensiveness_Evaluation, AOPC_Sufficiency_Evaluation
from ferret.explainers.explanation import Explanation
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer, PreTrainedTokenizerFast

ERASER_BINS = [0.01, 0.05, 0.10, 0.20, 0.50]


_top_k = discrete._get_id_tokens_top_k


def _top_k_fixed(soft_score_explanation, k, only_pos=True):
    """ferret 0.4.2's top-k with only_pos=False returns a numpy array and then tests ``id_top_k == []``,
    which raises for more than one index; same selection (argsort, descending), returned as a list."""
    if only_pos:
        return _top_k(soft_score_explanation, k, only_pos=True)
    return [int(i) for i in np.array(soft_score_explanation).argsort()[-k:][::-1]]


discrete._get_id_tokens_top_k = _top_k_fixed  # looked up at call time by _get_id_tokens_percentage


def variant_args(name: str, remove_first_last: bool) -> dict:
    args = {"remove_first_last": remove_first_last}
    if name == "default":
        return args
    if name == "allsigns":
        return {**args, "only_pos": False}
    if name in ("eraser", "protected"):
        return {**args, "only_pos": False, "removal_args": {"thresholds": ERASER_BINS}}
    raise SystemExit(f"unknown variant {name!r}")


class DecodeSpy:
    """Wraps the tokenizer's decode to count perturbed texts that do not tokenise back to their ids."""

    def __init__(self, tok):
        self.tok, self.orig = tok, tok.decode
        self.n = self.bad = 0

    def __call__(self, ids, *args, **kwargs):
        text = self.orig(ids, *args, **kwargs)
        back = self.tok(text, add_special_tokens=False)["input_ids"]
        self.n += 1
        self.bad += int(list(back) != [int(i) for i in ids])
        return text

    def take(self):
        out = (self.n, self.bad)
        self.n = self.bad = 0
        return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", required=True)
    p.add_argument("--model-dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--variants", default="default,allsigns,eraser,protected")
    p.add_argument("--limit", type=int, default=None)
    a = p.parse_args()

    try:
        tok = AutoTokenizer.from_pretrained(a.model_dir, local_files_only=True)
    except ValueError as err:
        # transformers 5 saves tokenizers without a model-specific class as "TokenizersBackend", which 4.x
        # does not know; the same tokenizer.json and special tokens load as a PreTrainedTokenizerFast
        if "TokenizersBackend" not in str(err):
            raise
        tok = PreTrainedTokenizerFast.from_pretrained(a.model_dir, local_files_only=True)
    config = AutoConfig.from_pretrained(a.model_dir, local_files_only=True)
    rope = getattr(config, "rope_parameters", None)
    if isinstance(rope, dict) and "rope_theta" in rope and rope.get("rope_type", "default") == "default":
        # transformers 5 writes RoPE settings as "rope_parameters"; 4.x reads only "rope_theta" and would
        # silently fall back to its default 10000 (SmolLM2 uses 100000), changing every logit
        config.rope_theta = float(rope["rope_theta"])
    model = AutoModelForSequenceClassification.from_pretrained(a.model_dir, config=config, local_files_only=True)
    model.eval()
    comp_ev = AOPC_Comprehensiveness_Evaluation(model, tok)
    suff_ev = AOPC_Sufficiency_Evaluation(model, tok)
    helper = comp_ev.helper
    spy = DecodeSpy(tok)
    tok.decode = spy
    # ferret recomputes p(target | full text) in every call and the same perturbed batches recur across
    # variants; a memo of ModelHelper._forward keyed by the exact batch (same texts, same order, so the
    # same padding) returns what the call would compute, only once
    memo = {}

    def memo_forward(orig):
        def forward(text, *args, **kwargs):
            key = ((text,) if isinstance(text, str) else tuple(text), args, tuple(sorted(kwargs.items())))
            if key not in memo:
                memo[key] = orig(text, *args, **kwargs)
            return memo[key]
        return forward

    for ev in (comp_ev, suff_ev):
        ev.helper._forward = memo_forward(ev.helper._forward)
    print(f"model {type(model).__name__} pad_token_id={model.config.pad_token_id} "
          f"rope_theta={getattr(model.config, 'rope_theta', None)} "
          f"tokenizer {type(tok).__name__} cls={tok.cls_token!r} pad={tok.pad_token_id} "
          f"side={tok.padding_side} model_max_length={tok.model_max_length}", flush=True)

    rows = [json.loads(line) for line in open(a.examples)]
    if a.limit:
        rows = rows[: a.limit]
    variants = a.variants.split(",")
    t0 = time.time()
    with open(a.out, "w") as f:
        for k, row in enumerate(rows):
            text, target = row["text"], int(row["target"])
            item = helper._tokenize(text)
            ids = item["input_ids"][0][: int(item["attention_mask"].sum())].tolist()
            tokens = helper.get_tokens(text)
            ids_match = ids == row["input_ids"]
            _, logits = helper._forward(text, output_hidden_states=False)
            prob = float(logits.softmax(-1)[0, target])
            # ferret strips the first and last ids only as [CLS]/[SEP]; without special tokens keep all
            has_specials = bool(row["special_tokens_mask"][0]) and bool(row["special_tokens_mask"][-1])
            memo.clear()
            for method, m in row["methods"].items():
                scores = np.array(m["scores"], dtype=np.float64)
                expl = Explanation(text=text, tokens=tokens, scores=scores, explainer=method, target=target)
                # with every candidate score > 0, only_pos=False selects exactly what only_pos=True does
                candidates = scores[1:-1] if has_specials else scores
                all_positive = bool((candidates > 0).all())
                done = {}
                explained = row.get("explained_position")
                for v in variants:
                    if v == "allsigns" and all_positive and "default" in done:
                        f.write(json.dumps({**done["default"], "variant": v, "same_as_default": True}) + "\n")
                        continue
                    if v == "protected" and explained is None:
                        continue
                    args = variant_args(v, has_specials)
                    comp_expl = suff_expl = expl
                    if v == "protected":  # never removed: last for comprehensiveness, first for sufficiency
                        low, high = scores.copy(), scores.copy()
                        low[explained] = scores.min() - 1.0
                        high[explained] = scores.max() + 1.0
                        comp_expl = Explanation(text=text, tokens=tokens, scores=low, explainer=method, target=target)
                        suff_expl = Explanation(text=text, tokens=tokens, scores=high, explainer=method, target=target)
                    spy.take()
                    comp = float(comp_ev.compute_evaluation(comp_expl, target=target, **args).score)
                    n_c, bad_c = spy.take()
                    suff = float(suff_ev.compute_evaluation(suff_expl, target=target, **args).score)
                    n_s, bad_s = spy.take()
                    done[v] = {"example": row["example"], "method": method, "variant": v,
                                        "comprehensiveness": comp, "sufficiency": suff,
                                        "levels_comp": n_c, "levels_suff": n_s,
                                        "retok_mismatch_comp": bad_c, "retok_mismatch_suff": bad_s,
                                        "ids_match": ids_match, "prob_ferret": prob, "prob_ours": row["prob"],
                                        "n_ids_ferret": len(ids), "n_ids_ours": len(row["input_ids"]),
                                        "tokens_ferret_first_last": [tokens[0], tokens[-1]]}
                    f.write(json.dumps(done[v]) + "\n")
            f.flush()
            if (k + 1) % 10 == 0:
                print(f"{k + 1}/{len(rows)} examples, {time.time() - t0:.0f} s", flush=True)
    print(f"wrote {a.out} ({len(rows)} examples, {time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
