"""The metric matrix script (benchmarks/metric_matrix.py): its records are the library's metrics, its cache
resumes, and its rank agreement and summary count what they say."""

from __future__ import annotations

import json
import math

import pytest
import torch

TEXTS = ["the movie was very good", "a boring plot", "the film is not fun", "great fun , great plot",
         "awful movie", "the plot was bad"]
TRAIN = [("the film was great", 1), ("a bad plot", 0), ("very boring", 0), ("good fun", 1), ("not good", 0),
         ("great movie", 1)]


@pytest.fixture(scope="module")
def mm(benchmark_script):
    return benchmark_script("metric_matrix.py")


@pytest.fixture(scope="module")
def settings(mm):
    return mm.MetricSettings(soft_samples=3, naopc_beam=2, ffid_samples=2, ffid_train=4, ffid_steps=2)


@pytest.fixture(scope="module")
def methods(mm):
    return [mm.CELLS["minilm--movie-sentences"].default, "gae", "random"]


@pytest.fixture(scope="module")
def first_run(mm, tiny, settings, methods, tmp_path_factory):
    model, tokenizer = tiny
    before = {k: v.clone() for k, v in model.state_dict().items()}
    out = tmp_path_factory.mktemp("metric-matrix") / "minilm--movie-sentences"
    dataset = [(t, i % 2) for i, t in enumerate(TEXTS)]
    done = mm.run_metrics(model, tokenizer, dataset, TRAIN, methods, 3, out, settings=settings, log=lambda m: None)
    return out, dataset, done, before


def test_records_are_the_library_metrics_called_directly(mm, tiny, settings, methods, first_run):
    from captum_prxai.bench import make_forward_func, select_examples
    from captum_prxai.bench.cache import RecordCache
    from captum_prxai.metrics import (ERASER_BINS, comprehensiveness, f_fidelity, normalized_aopc,
                                      random_mask_finetune, soft_comprehensiveness, soft_sufficiency, sufficiency)

    model, tokenizer = tiny
    out, dataset, done, before = first_run
    assert done["computed"] == 9 and done["cached"] == 0
    assert [r["method"] for r in done["records"]] == methods * 3
    # the user's model is untouched by F-Fidelity's fine-tuning
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    scores_of = {(r["example"], r["method"]): r["scores"] for r in RecordCache(out / "cache.jsonl").read().values()}
    picked = select_examples(len(TRAIN), settings.ffid_train, settings.seed)
    enc = tokenizer([TRAIN[i][0] for i in picked], padding=True, return_special_tokens_mask=True,
                    return_tensors="pt")
    tuned = random_mask_finetune(model, enc["input_ids"], enc["attention_mask"],
                                 torch.tensor([TRAIN[i][1] for i in picked]), enc["special_tokens_mask"], steps=2,
                                 lr=5e-5, mask_rate=0.1, train_batch_size=8, pad_token_id=0, seed=0)
    forward = make_forward_func(model)

    def embed_forward(e, m):
        return model(inputs_embeds=e, attention_mask=m).logits

    by_example, compared = {}, set()
    for rec in done["records"]:
        by_example.setdefault(rec["example"], []).append(rec)
    for index, recs in by_example.items():
        # one batch per example: its methods' scores as rows, the example repeated
        x = tokenizer(dataset[index][0], return_special_tokens_mask=True, return_tensors="pt")
        scores = torch.tensor([scores_of[(index, r["method"])] for r in recs])
        ids, mask, special = (x[k].expand(len(recs), -1) for k in ("input_ids", "attention_mask",
                                                                   "special_tokens_mask"))
        target = int(forward(ids[:1], mask[:1]).argmax())
        assert {r["target"] for r in recs} == {target}
        embeds = model.get_input_embeddings()(ids).detach()
        soft = dict(target=target, n_samples=3, seed=0)
        fid = f_fidelity(model, ids, mask, special, scores, target=target, n_samples=2, finetuned=tuned)
        replaced = dict(target=target, mode="replace", replacement_id=tokenizer.mask_token_id)
        expected = {
            "eraser_comp": comprehensiveness(forward, ids, mask, special, scores, target=target).mean,
            "eraser_suff": sufficiency(forward, ids, mask, special, scores, target=target).mean,
            "soft_comp": soft_comprehensiveness(embed_forward, embeds, mask, special, scores, **soft),
            "soft_suff": soft_sufficiency(embed_forward, embeds, mask, special, scores, **soft),
            "naopc": normalized_aopc(forward, ids, mask, special, scores, target=target, beam_width=2).naopc,
            "ffid_comp": fid.fid_plus, "ffid_suff": fid.fid_minus,
            "replace_comp": comprehensiveness(forward, ids, mask, special, scores, bins=ERASER_BINS,
                                              **replaced).mean,
            "replace_suff": sufficiency(forward, ids, mask, special, scores, bins=ERASER_BINS, **replaced).mean,
        }
        for row, rec in enumerate(recs):
            assert set(rec["metrics"]) == set(expected)
            for key, value in expected.items():
                want = float(value[row])
                if math.isnan(want):  # e.g. Soft-NC where the all-zero input keeps the class: no value, said so
                    assert rec["metrics"][key] is None, (rec["method"], key)
                    continue
                assert rec["metrics"][key] == pytest.approx(want, abs=1e-6), (rec["method"], key)
                compared.add(key)
            assert rec["time_s"] > 0 and rec["peak_mem_mb"] >= 0
    assert compared == {m.key for m in mm.METRICS}  # every metric was compared on a value somewhere


def test_a_rerun_computes_nothing_and_a_lost_record_is_computed_again(mm, tiny, settings, methods, first_run):
    model, tokenizer = tiny
    out, dataset, done, _ = first_run
    again = mm.run_metrics(model, tokenizer, dataset, TRAIN, methods, 3, out, settings=settings, log=lambda m: None)
    assert again["computed"] == 0 and again["cached"] == 9
    assert again["records"] == done["records"]
    lines = (out / "metrics.jsonl").read_text().splitlines()
    (out / "metrics.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    third = mm.run_metrics(model, tokenizer, dataset, TRAIN, methods, 3, out, settings=settings, log=lambda m: None)
    assert third["computed"] == 1 and third["cached"] == 8  # the example is computed again, its batch the same
    assert third["records"] == done["records"]
    # other settings are other records: nothing is reused under them
    other = mm.MetricSettings(soft_samples=2, naopc_beam=2, ffid_samples=2, ffid_train=4, ffid_steps=2)
    assert set(mm.metric_keys({m: "k" for m in methods}, other, 4, methods).values()).isdisjoint(
        mm.metric_keys({m: "k" for m in methods}, settings, 4, methods).values())


def test_tables_list_the_run_cell_and_mark_the_others_not_run(mm, settings, methods, first_run, tmp_path):
    out, _, done, _ = first_run
    mm.write_meta(out, out.name, methods, done, settings)
    path = mm.write_tables(tmp_path / "metric_matrix.md", out.parent)
    text = path.read_text()
    assert "MiniLM · sentences (n=3)" in text
    assert "MPNet · BBC News, long (not run)" in text and "Not run yet" in text and "mpnet--bbc-news" in text
    for metric in mm.METRICS:
        assert f"## {metric.header}" in text
    assert "## Rank agreement between the metrics" in text and "CPU s / example" in text


def test_kendall_tau_matches_a_hand_count(mm):
    # (1,2,3,4) against (1,3,2,4): 5 concordant pairs, 1 discordant, no ties -> (5 - 1) / 6
    assert mm.kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    assert mm.kendall_tau([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # rank agreement orients lower-is-better metrics: the same order of the methods read both ways agrees fully
    up, down = mm.Metric("a", "A", True), mm.Metric("b", "B", False)
    cell = {"a": {"m1": {0: 0.9}, "m2": {0: 0.5}, "m3": {0: 0.1}},
            "b": {"m1": {0: 0.1}, "m2": {0: 0.2}, "m3": {0: 0.3}}}
    other = {"a": {"m1": {0: 0.9}, "m2": {0: 0.5}, "m3": {0: 0.1}},
             "b": {"m1": {0: 0.3}, "m2": {0: 0.1}, "m3": {0: 0.2}}}
    # second cell: b's order (best first) m2, m3, m1 against a's m1, m2, m3: pairs (m1,m2) discordant,
    # (m1,m3) discordant, (m2,m3) concordant -> (1 - 2) / 3
    agreement = mm.rank_agreement([cell, other], [up, down])
    assert agreement[("a", "b")]["n"] == 2
    assert agreement[("a", "b")]["mean"] == pytest.approx((1.0 + (-1 / 3)) / 2)


def test_summary_counts_first_level_and_behind_on_a_hand_made_table(mm):
    d = "default"
    first = {d: {0: 0.6, 1: 0.7}, "gae": {0: 0.5, 1: 0.6}, "random": {0: 0.9, 1: 0.9}}
    # the best rival leads by 0.05 on average, and the paired differences (-0.1, 0.0) have s.e. 0.05: level
    level = {d: {0: 0.5, 1: 0.6}, "gae": {0: 0.6, 1: 0.6}, "random": {0: 0.0, 1: 0.0}}
    # the rival leads by 0.1 on every example (s.e. 0): behind
    behind = {d: {0: 0.5, 1: 0.6}, "gae": {0: 0.6, 1: 0.7}, "ig": {0: 0.0, 1: 0.0}}
    assert mm.standing(first, d, higher=True) == "first"  # the random control is not ranked
    assert mm.standing(level, d, higher=True) == "level"
    assert mm.standing(behind, d, higher=True) == "behind"
    # lower is better: the same table read the other way round
    assert mm.standing(behind, d, higher=False) == "behind"  # ig (0.0) is the best there
    assert mm.standing({d: {0: 0.1}, "gae": {0: 0.2}}, d, higher=False) == "first"
    assert mm.standing({"gae": {0: 0.2}}, d, higher=True) is None
    assert mm.best_method(behind, higher=True) == "gae" and mm.best_method(behind, higher=False) == "ig"
    assert mm.best_method(first, higher=True) == d  # the control's 0.9 is not a method's
    counts = mm.summary_counts({"m": {"c1": "first", "c2": "level", "c3": "behind", "c4": None},
                                "n": {"c1": "behind", "c2": "behind"}})
    assert counts["m"] == {"first": ["c1"], "level": ["c2"], "behind": ["c3"], "run": 3}
    assert counts["n"]["run"] == 2 and counts["n"]["behind"] == ["c1", "c2"] and not counts["n"]["first"]
    assert not math.isnan(mm.kendall_tau([0.1, 0.2], [0.3, 0.4]))
    assert json.dumps(counts)  # plain values


def test_a_decoder_cell_runs_with_its_explained_token_protected(mm, tiny_decoder, tmp_path):
    from captum_prxai.bench import make_forward_func
    from captum_prxai.bench.cache import RecordCache
    from captum_prxai.metrics import comprehensiveness, protect_positions, replacement_token_id

    model, tokenizer = tiny_decoder
    settings = mm.MetricSettings(soft_samples=2, naopc_beam=1, ffid_samples=1, ffid_train=4, ffid_steps=1)
    dataset = [(t, i % 2) for i, t in enumerate(TEXTS)]
    done = mm.run_metrics(model, tokenizer, dataset, TRAIN, ["gae", "random"], 2, tmp_path, settings=settings,
                          log=lambda m: None)
    assert done["computed"] == 4
    assert len(RecordCache(tmp_path / "metrics.jsonl").read()) == 4
    scores_of = {(r["example"], r["method"]): r["scores"] for r in RecordCache(tmp_path / "cache.jsonl").read().values()}
    forward = make_forward_func(model)
    rid = replacement_token_id(tokenizer, causal=True)  # a decoder has no [MASK]: a space, else its unknown token
    for rec in done["records"]:
        assert set(rec["metrics"]) == {m.key for m in mm.METRICS}
        x = tokenizer(dataset[rec["example"]][0], return_special_tokens_mask=True, return_tensors="pt")
        ids, mask = x["input_ids"], x["attention_mask"]
        # the explained (last) token is never removed on a decoder, as in the matrix
        protected = protect_positions(x["special_tokens_mask"], mask, torch.tensor([ids.shape[1] - 1]))
        scores = torch.tensor([scores_of[(rec["example"], rec["method"])]])
        want = comprehensiveness(forward, ids, mask, protected, scores, target=rec["target"], mode="replace",
                                 replacement_id=rid).mean
        assert rec["metrics"]["replace_comp"] == pytest.approx(float(want[0]), abs=1e-6)
