"""Tests for captum_prxai.metrics on hand-computable toy models."""

import math

import pytest
import torch
from torch import nn

from captum_prxai.exceptions import PRXAIError
from captum_prxai.metrics import (
    ERASER_BINS,
    accuracy_after_removal,
    aopc,
    aopc_from_curve,
    bootstrap_ci,
    comprehensiveness,
    deletion_curve,
    evaluate_faithfulness,
    format_mean_sem,
    log_odds,
    mean_sem,
    num_tokens_to_remove,
    probability_forward,
    protect_positions,
    random_token_selection,
    remove_tokens,
    remove_top_k,
    select_tokens,
    sufficiency,
    token_explanation_func,
    token_infidelity_perturb_func,
    token_sensitivity_perturb_func,
)

PAD, CLS, SEP, MASK, KEY = 0, 1, 2, 3, 7
SPECIAL_IDS = (PAD, CLS, SEP, MASK)


def key_model(ids, mask):
    """Class 1 wins iff token KEY is present (and attended): logits [0.5, 3 * present]."""
    present = ((ids == KEY) & mask.bool()).any(dim=1).float()
    return torch.stack([torch.full_like(present, 0.5), 3.0 * present], dim=1)


P_PRESENT = torch.softmax(torch.tensor([0.5, 3.0]), 0)[1].item()
P_ABSENT = torch.softmax(torch.tensor([0.5, 0.0]), 0)[1].item()


class AdditiveModel(nn.Module):
    """Class-1 logit = sum of a per-token weight over attended tokens; class-0 logit = 0."""

    def __init__(self, weights):
        super().__init__()
        self.emb = nn.Embedding(len(weights), 1)
        with torch.no_grad():
            self.emb.weight.copy_(torch.as_tensor(weights, dtype=torch.float32).view(-1, 1))

    def forward(self, ids, mask):
        e = self.emb(ids.long()).squeeze(-1) * mask.float()
        s = e.sum(dim=1)
        return torch.stack([torch.zeros_like(s), s], dim=1)


def batch(rows, pad_to=None):
    """Build CLS ... SEP + right padding, with masks."""
    length = pad_to or max(len(r) for r in rows) + 2
    ids = torch.full((len(rows), length), PAD)
    mask = torch.zeros((len(rows), length), dtype=torch.long)
    special = torch.ones((len(rows), length), dtype=torch.long)
    for i, r in enumerate(rows):
        seq = [CLS] + list(r) + [SEP]
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, : len(seq)] = 1
        special[i, 1 : len(seq) - 1] = 0
    return ids, mask, special


# ----------------------------------------------------------------- masking
@pytest.mark.parametrize(
    "n,fraction,expected",
    [(10, 0.0, 0), (10, 0.01, 1), (10, 0.05, 1), (10, 0.1, 1), (10, 0.2, 2), (10, 0.5, 5),
     (10, 1.0, 10), (3, 0.5, 2), (5, 0.1, 1), (0, 0.5, 0), (40, 0.05, 2), (7, 0.2, 1)],
)
def test_num_tokens_to_remove(n, fraction, expected):
    assert num_tokens_to_remove(torch.tensor([n]), fraction).item() == expected


def test_num_tokens_bad_fraction():
    with pytest.raises(PRXAIError, match="0.2"):
        num_tokens_to_remove(torch.tensor([3]), 20)


def test_delete_repacks_left_and_updates_mask():
    ids, mask, special = batch([[10, 11, 12], [13]])
    remove = torch.zeros_like(ids, dtype=torch.bool)
    remove[0, 2] = True  # token 11
    remove[1, 1] = True  # token 13
    new_ids, new_mask = remove_tokens(ids, mask, remove, "delete", pad_token_id=PAD)
    assert new_ids.tolist() == [[CLS, 10, 12, SEP, PAD], [CLS, SEP, PAD, PAD, PAD]]
    assert new_mask.tolist() == [[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]]
    # The input is untouched.
    assert ids[0, 2].item() == 11


def test_delete_left_padding_packs_right():
    ids = torch.tensor([[PAD, CLS, 10, 11, SEP]])
    mask = torch.tensor([[0, 1, 1, 1, 1]])
    remove = torch.tensor([[False, False, True, False, False]])
    new_ids, new_mask = remove_tokens(ids, mask, remove, "delete", padding_side="left")
    assert new_ids.tolist() == [[PAD, PAD, CLS, 11, SEP]]
    assert new_mask.tolist() == [[0, 0, 1, 1, 1]]


def test_replace_keeps_positions_and_mask():
    ids, mask, special = batch([[10, 11, 12]])
    remove = torch.tensor([[False, True, False, True, False]])
    new_ids, new_mask = remove_tokens(ids, mask, remove, "replace", replacement_id=MASK)
    assert new_ids.tolist() == [[CLS, MASK, 11, MASK, SEP]]
    assert torch.equal(new_mask, mask)


def test_replace_needs_replacement_id():
    ids, mask, _ = batch([[10]])
    with pytest.raises(PRXAIError, match="replacement_id"):
        remove_tokens(ids, mask, torch.zeros_like(ids, dtype=torch.bool), "replace")
    with pytest.raises(PRXAIError, match="mode"):
        remove_tokens(ids, mask, torch.zeros_like(ids, dtype=torch.bool), "drop")


def test_select_never_picks_special_or_padding_and_breaks_ties_by_position():
    ids, mask, special = batch([[10, 11, 12, 13], [14, 15]])
    scores = torch.tensor([[100.0, 1.0, 5.0, 5.0, 0.0, 100.0], [100.0, 1.0, 2.0, 100.0, 100.0, 100.0]])
    sel = select_tokens(scores, mask, special, 0.5)
    # Row 0: 4 real tokens -> k=2; the two 5.0 scores (positions 2, 3).
    assert sel[0].nonzero().flatten().tolist() == [2, 3]
    # Row 1: 2 real tokens -> k=1; highest real score at position 2.
    assert sel[1].nonzero().flatten().tolist() == [2]
    ties = select_tokens(torch.zeros_like(scores), mask, special, 0.5)
    assert ties[0].nonzero().flatten().tolist() == [1, 2]
    least = select_tokens(scores, mask, special, 0.25, largest=False)
    assert least[0].nonzero().flatten().tolist() == [4]


def test_protect_positions_adds_one_position_per_example_to_the_special_mask():
    ids, mask, special = batch([[5, 6, 7], [8, 9]])
    out = protect_positions(special, mask, torch.tensor([3, 1]))
    assert out.dtype == torch.long and out.shape == special.shape
    expected = special.clone()
    expected[0, 3] = 1
    expected[1, 1] = 1
    assert torch.equal(out, expected)
    assert torch.equal(protect_positions(None, mask, torch.tensor([0, 2])),
                       torch.tensor([[1, 0, 0, 0, 0], [0, 0, 1, 0, 0]]))
    with pytest.raises(PRXAIError, match="one index per example"):
        protect_positions(special, mask, torch.tensor([1]))
    with pytest.raises(PRXAIError, match="must lie in 0..4"):
        protect_positions(special, mask, torch.tensor([1, 5]))


def test_protected_explained_token_is_in_every_perturbed_input():
    """A decoder reads its class at the last real token: with it protected, no perturbed input lacks it."""
    last = 11
    ids = torch.tensor([[4, 5, 6, 7, last], [8, 9, last, 0, 0]])
    mask = (ids != 0).long()
    special = torch.zeros_like(ids)
    scores = torch.tensor([[0.1, 0.2, 0.3, 0.4, 9.0], [0.5, 0.6, 9.0, 0.0, 0.0]])  # the last token ranked first
    seen = []

    def forward(i, m):
        seen.append((i.clone(), m.clone()))
        return key_model(i, m)

    protected = protect_positions(special, mask, torch.tensor([4, 2]))
    evaluate_faithfulness(forward, ids, mask, protected, scores, mode="delete", steps=4)
    rows = [row for batch_ids, _ in seen for row in batch_ids]
    assert rows and all(bool((row == last).any()) for row in rows)
    seen.clear()
    evaluate_faithfulness(forward, ids, mask, special, scores, mode="delete", steps=4)
    assert any(not bool((i == last).any()) for batch_ids, _ in seen for i in batch_ids)


def test_select_rejects_nan_and_shape_mismatch():
    ids, mask, special = batch([[10, 11]])
    with pytest.raises(PRXAIError, match="NaN"):
        select_tokens(torch.full(ids.shape, float("nan")), mask, special, 0.5)
    with pytest.raises(PRXAIError, match="shape"):
        select_tokens(torch.zeros(1, 3), mask, special, 0.5)


def test_remove_top_k_keep_only_top():
    ids, mask, special = batch([[10, 11, 12, 13]])
    scores = torch.tensor([[0.0, 0.1, 0.9, 0.2, 0.3, 0.0]])
    kept_ids, kept_mask = remove_top_k(ids, mask, special, scores, 0.25, keep=True)
    assert kept_ids[0, : int(kept_mask.sum())].tolist() == [CLS, 11, SEP]
    removed_ids, removed_mask = remove_top_k(ids, mask, special, scores, 0.5)
    assert removed_ids[0, : int(removed_mask.sum())].tolist() == [CLS, 10, 12, SEP]


# ----------------------------------------------------------------- metrics
def oracle_key_scores(ids):
    return (ids == KEY).float()


def test_comprehensiveness_equals_probability_drop_of_key_token():
    ids, mask, special = batch([[10, KEY, 11, 12, 13], [KEY, 14]])
    comp = comprehensiveness(key_model, ids, mask, special, oracle_key_scores(ids))
    expected = P_PRESENT - P_ABSENT
    assert comp.per_bin.shape == (2, len(ERASER_BINS))
    assert torch.allclose(comp.per_bin, torch.full((2, 5), expected), atol=1e-6)
    assert torch.allclose(comp.mean, torch.full((2,), expected), atol=1e-6)
    # Same with replacement by [MASK].
    comp_r = comprehensiveness(key_model, ids, mask, special, oracle_key_scores(ids),
                               mode="replace", replacement_id=MASK)
    assert torch.allclose(comp_r.mean, comp.mean)
    # Scores ranking KEY last never remove it from the 5-token row (k <= 3 of 5 at every bin).
    anti = -oracle_key_scores(ids)
    comp_anti = comprehensiveness(key_model, ids, mask, special, anti)
    assert torch.allclose(comp_anti.per_bin[0], torch.zeros(5), atol=1e-6)


def test_sufficiency_of_keeping_only_key_is_zero():
    ids, mask, special = batch([[10, KEY, 11, 12, 13, 14, 15, 16, 17, 18]])
    suff = sufficiency(key_model, ids, mask, special, oracle_key_scores(ids))
    assert torch.allclose(suff.mean, torch.zeros(1), atol=1e-6)
    # Anti-oracle keeps <= 5 of 10 tokens, never KEY: the whole drop at every bin.
    suff_bad = sufficiency(key_model, ids, mask, special, -oracle_key_scores(ids))
    assert torch.allclose(suff_bad.mean, torch.tensor([P_PRESENT - P_ABSENT]), atol=1e-6)


def test_target_argument_and_explicit_target():
    ids, mask, special = batch([[KEY, 10]])
    c1 = comprehensiveness(key_model, ids, mask, special, oracle_key_scores(ids), target=1)
    c0 = comprehensiveness(key_model, ids, mask, special, oracle_key_scores(ids), target=0)
    assert torch.allclose(c0.mean, -c1.mean, atol=1e-6)  # two classes: drops are opposite
    with pytest.raises(PRXAIError, match="target"):
        comprehensiveness(key_model, ids, mask, special, oracle_key_scores(ids), target=5)


def _random_additive_problem(n=64, length=16, vocab=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    weights = torch.rand(vocab, generator=g) * 0.5
    weights[:4] = 0.0  # special ids carry no weight
    model = AdditiveModel(weights).eval()
    rows = [torch.randint(4, vocab, (length,), generator=g).tolist() for _ in range(n)]
    ids, mask, special = batch(rows)
    oracle = weights[ids]
    random_scores = torch.rand(ids.shape, generator=g)
    return model, weights, ids, mask, special, oracle, random_scores


def test_oracle_beats_random_on_additive_model():
    model, weights, ids, mask, special, oracle, rnd = _random_additive_problem()
    c_or = comprehensiveness(model, ids, mask, special, oracle, target=1).mean.mean()
    c_rnd = comprehensiveness(model, ids, mask, special, rnd, target=1).mean.mean()
    c_anti = comprehensiveness(model, ids, mask, special, -oracle, target=1).mean.mean()
    assert c_or > c_rnd + 0.02 and c_rnd > c_anti + 0.02
    s_or = sufficiency(model, ids, mask, special, oracle, target=1).mean.mean()
    s_rnd = sufficiency(model, ids, mask, special, rnd, target=1).mean.mean()
    assert s_or < s_rnd
    a_or = aopc(model, ids, mask, special, oracle, target=1).mean()
    a_rnd = aopc(model, ids, mask, special, rnd, target=1).mean()
    assert a_or > a_rnd
    lo_or = log_odds(model, ids, mask, special, oracle, target=1).mean()
    lo_rnd = log_odds(model, ids, mask, special, rnd, target=1).mean()
    assert lo_or < lo_rnd


def test_deletion_curve_endpoints_and_monotonicity():
    model, weights, ids, mask, special, oracle, _ = _random_additive_problem(n=4)
    most = deletion_curve(model, ids, mask, special, oracle, target=1, steps=10, order="most")
    least = deletion_curve(model, ids, mask, special, oracle, target=1, steps=10, order="least")
    p_full = torch.softmax(model(ids, mask), 1)[:, 1]
    assert most.probs.shape == (4, 11) and most.fractions[0] == 0 and most.fractions[-1] == 1
    assert torch.allclose(most.probs[:, 0], p_full)
    # Everything removed: only [CLS] [SEP] with zero weight -> logits (0, 0) -> 0.5.
    assert torch.allclose(most.probs[:, -1], torch.full((4,), 0.5), atol=1e-6)
    assert torch.allclose(least.probs[:, -1], most.probs[:, -1])
    # Removing positive-weight tokens, most relevant first, lowers p monotonically and faster.
    assert (most.probs[:, 1:] <= most.probs[:, :-1] + 1e-6).all()
    assert (most.probs <= least.probs + 1e-6).all()
    assert (aopc_from_curve(most) > aopc_from_curve(least)).all()


def test_aopc_from_curve_by_hand():
    probs = torch.tensor([[0.9, 0.6, 0.3], [0.5, 0.5, 0.5]])
    # (0 + 0.3 + 0.6) / 3 = 0.3
    assert torch.allclose(aopc_from_curve(probs), torch.tensor([0.3, 0.0]))


def test_log_odds_and_accuracy_by_hand():
    ids, mask, special = batch([[10, KEY, 11, 12, 13]])
    lo = log_odds(key_model, ids, mask, special, oracle_key_scores(ids))
    assert torch.allclose(lo, torch.tensor([math.log(P_ABSENT) - math.log(P_PRESENT)]), atol=1e-6)
    acc = accuracy_after_removal(key_model, ids, mask, special, oracle_key_scores(ids), labels=1)
    assert acc.tolist() == [0.0]  # key removed -> class 0 predicted
    acc_anti = accuracy_after_removal(key_model, ids, mask, special, -oracle_key_scores(ids), labels=1)
    assert acc_anti.tolist() == [1.0]
    acc_pred = accuracy_after_removal(key_model, ids, mask, special, oracle_key_scores(ids))
    assert acc_pred.tolist() == [0.0]


def test_evaluate_faithfulness_matches_individual_metrics():
    model, weights, ids, mask, special, oracle, rnd = _random_additive_problem(n=5, length=9)
    for mode, rep in (("delete", None), ("replace", MASK)):
        kw = dict(mode=mode, replacement_id=rep, pad_token_id=PAD)
        res = evaluate_faithfulness(model, ids, mask, special, rnd, batch_size=7, **kw)
        comp = comprehensiveness(model, ids, mask, special, rnd, **kw)
        suff = sufficiency(model, ids, mask, special, rnd, **kw)
        assert torch.allclose(res["comprehensiveness"], comp.mean, atol=1e-6)
        assert torch.allclose(res["sufficiency"], suff.mean, atol=1e-6)
        assert torch.allclose(res["comprehensiveness@20"], comp.per_bin[:, 3], atol=1e-6)
        assert torch.allclose(res["sufficiency@1"], suff.per_bin[:, 0], atol=1e-6)
        curve = deletion_curve(model, ids, mask, special, rnd, order="least", **kw)
        assert torch.allclose(res["curve_least"], curve.probs, atol=1e-6)
        assert torch.allclose(res["aopc_most"], aopc(model, ids, mask, special, rnd, **kw), atol=1e-6)
        assert torch.allclose(res["log_odds"], log_odds(model, ids, mask, special, rnd, **kw), atol=1e-5)
        acc = accuracy_after_removal(model, ids, mask, special, rnd, **kw)
        assert torch.equal(res["accuracy"], acc)


def test_metrics_run_without_grad():
    model, weights, ids, mask, special, oracle, _ = _random_additive_problem(n=2)
    seen = []

    def fwd(i, m):
        seen.append(torch.is_grad_enabled())
        return model(i, m)

    comprehensiveness(fwd, ids, mask, special, oracle)
    assert seen and not any(seen)


def test_batching_limits_forward_batch_size_and_runs_each_distinct_input_once():
    model, weights, ids, mask, special, oracle, _ = _random_additive_problem(n=3)
    sizes, seen_rows = [], []

    def fwd(i, m):
        sizes.append(i.shape[0])
        seen_rows.extend(tuple(r) for r in torch.cat([i, m], dim=1).tolist())
        return model(i, m)

    evaluate_faithfulness(fwd, ids, mask, special, oracle, batch_size=4)
    # 1 unperturbed pass of 3, then at most 3 * (5 + 5 + 10 + 10 + 2) = 96 perturbed rows in chunks <= 4;
    # bins and curve points that remove the same tokens are the same input and run once.
    perturbed = seen_rows[3:]
    assert sizes[0] == 3 and max(sizes[1:]) <= 4
    assert len(perturbed) == len(set(perturbed)) < 96


def test_chunks_drop_trailing_padding_without_changing_results():
    model, weights, ids, mask, special, oracle, _ = _random_additive_problem(n=3)
    widths = []

    def trimmed(i, m):
        widths.append((i.shape[1], int(m.sum(dim=1).max())))
        return model(i, m)

    def full_width(i, m):  # pads every chunk back to the original width
        pad = ids.shape[1] - i.shape[1]
        return model(torch.nn.functional.pad(i, (0, pad)), torch.nn.functional.pad(m, (0, pad)))

    a = evaluate_faithfulness(trimmed, ids, mask, special, oracle, batch_size=4)
    b = evaluate_faithfulness(full_width, ids, mask, special, oracle, batch_size=4)
    assert any(w < ids.shape[1] for w, _ in widths[1:])
    assert all(w == longest for w, longest in widths[1:])  # right-packed rows: cut right after the longest
    for key in ("comprehensiveness", "sufficiency", "aopc_most", "aopc_least", "log_odds", "accuracy"):
        torch.testing.assert_close(a[key], b[key])


# ----------------------------------------------------------------- captum integration
def test_random_token_selection_respects_protected_ids():
    ids, mask, special = batch([[10, 11, 12, 13, 14], [15, 16]])
    sel = random_token_selection(ids, SPECIAL_IDS, fraction=0.4, generator=torch.Generator().manual_seed(1))
    assert sel.sum(1).tolist() == [2, 1]
    assert not sel[torch.isin(ids, torch.tensor(SPECIAL_IDS))].any()
    sel_n = random_token_selection(ids, SPECIAL_IDS, n_tokens=3)
    assert sel_n.sum(1).tolist() == [3, 2]


def test_infidelity_zero_for_exact_additive_attributions():
    from captum.attr import FeatureAblation
    from captum.metrics import infidelity

    model, weights, ids, mask, special, oracle, rnd = _random_additive_problem(n=3, length=8)
    base = torch.where(special.bool(), ids, torch.full_like(ids, MASK))
    attr = FeatureAblation(model).attribute(ids, baselines=base, target=1, additional_forward_args=(mask,))
    assert torch.allclose(attr, oracle * (1 - special), atol=1e-5)
    perturb = token_infidelity_perturb_func(MASK, SPECIAL_IDS, fraction=0.3, seed=0)
    infid = infidelity(model, perturb, ids, attr, additional_forward_args=(mask,), target=1,
                       n_perturb_samples=6)
    infid_rnd = infidelity(model, token_infidelity_perturb_func(MASK, SPECIAL_IDS, fraction=0.3, seed=0),
                           ids, rnd, additional_forward_args=(mask,), target=1, n_perturb_samples=6)
    assert infid.shape == (3,)
    assert torch.allclose(infid, torch.zeros(3), atol=1e-8)
    assert (infid_rnd > 1e-3).all()
    # Probability outputs work too and stay finite.
    infid_p = infidelity(probability_forward(model), perturb, ids, attr, additional_forward_args=(mask,),
                         target=1, n_perturb_samples=2)
    assert torch.isfinite(infid_p).all()


def test_infidelity_perturb_func_contract():
    ids, mask, special = batch([[10, 11, 12, 13, 14]])
    perturb = token_infidelity_perturb_func(MASK, SPECIAL_IDS, fraction=0.4, seed=3)
    pert, new_ids = perturb(ids)
    assert pert.dtype == torch.float32 and pert.shape == ids.shape and new_ids.dtype == ids.dtype
    assert torch.equal(new_ids == MASK, pert.bool())
    pert_t, inputs_t = perturb((ids, mask))
    assert torch.equal(inputs_t[1], mask) and not pert_t[1].any()


def test_sensitivity_max_with_gradient_and_ablation_methods():
    from captum.attr import FeatureAblation, LayerGradientXActivation
    from captum.metrics import sensitivity_max

    model, weights, ids, mask, special, oracle, _ = _random_additive_problem(n=2, length=6)
    perturb = token_sensitivity_perturb_func(MASK, SPECIAL_IDS, n_tokens=1, seed=0)
    # Input x gradient on the embedding needs gradients although sensitivity_max runs under no_grad.
    ixg = LayerGradientXActivation(model, model.emb)

    explain = token_explanation_func(ixg.attribute)  # tuple in -> tuple out, hidden dim summed

    with torch.no_grad():
        direct = explain(ids, target=1, additional_forward_args=(mask,))
        direct_t = explain((ids,), target=1, additional_forward_args=(mask,))
    assert isinstance(direct_t, tuple) and torch.equal(direct_t[0], direct)
    assert torch.allclose(direct, oracle, atol=1e-6)
    sens = sensitivity_max(explain, ids, perturb, n_perturb_samples=4, target=1,
                           additional_forward_args=(mask,))
    # One replaced token changes exactly one attribution from w to 0 (MASK has weight 0).
    real_w = oracle * (1 - special)
    bound = real_w.abs().max(dim=1).values / oracle.norm(dim=1)
    assert sens.shape == (2,) and (sens > 0).all() and (sens <= bound + 1e-6).all()
    base = torch.where(special.bool(), ids, torch.full_like(ids, MASK))
    sens_fa = sensitivity_max(token_explanation_func(FeatureAblation(model).attribute), ids, perturb, n_perturb_samples=3,
                              target=1, baselines=base, additional_forward_args=(mask,))
    assert sens_fa.shape == (2,) and (sens_fa > 0).all()


# ----------------------------------------------------------------- stats
def test_mean_sem_by_hand():
    mean, sem = mean_sem([1.0, 2.0, 3.0, 4.0])
    assert mean == pytest.approx(2.5)
    assert sem == pytest.approx(math.sqrt(5 / 3) / 2)
    m1, s1 = mean_sem([2.0])
    assert m1 == 2.0 and math.isnan(s1)
    assert math.isnan(mean_sem([])[0])
    assert mean_sem([1.0, float("nan"), 3.0])[0] == pytest.approx(2.0)
    assert format_mean_sem([1.0, 2.0, 3.0, 4.0], digits=2) == "2.50 ± 0.65"


def test_bootstrap_ci():
    g = torch.Generator().manual_seed(0)
    small = torch.randn(20, generator=g)
    big = torch.randn(2000, generator=g)
    lo, hi = bootstrap_ci(small, n_resamples=500)
    assert lo < float(small.mean()) < hi
    lo_b, hi_b = bootstrap_ci(big, n_resamples=500)
    assert hi_b - lo_b < hi - lo
    assert bootstrap_ci([3.0] * 5) == (3.0, 3.0)
    assert bootstrap_ci(small, seed=1) == bootstrap_ci(small, seed=1)
    with pytest.raises(PRXAIError):
        bootstrap_ci(small, confidence=95)
