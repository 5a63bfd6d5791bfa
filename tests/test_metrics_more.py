"""Soft comprehensiveness/sufficiency, normalised AOPC, F-Fidelity and the replacement token,
each checked against a hand computation on a toy bag-of-embeddings classifier."""

import itertools
import math

import pytest
import torch
from torch import nn

from captum_prxai.exceptions import PRXAIError
from captum_prxai.metrics import (
    comprehensiveness,
    f_fidelity,
    normalized_aopc,
    normalized_importance,
    random_mask_finetune,
    replacement_token_id,
    soft_comprehensiveness,
    soft_sufficiency,
    sufficiency,
)

PAD, CLS, MASK = 0, 1, 2


def sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


class BagOfEmbeddings(nn.Module):
    """Class-1 logit = sum over attended tokens of the first embedding coordinate; class-0 logit = 0.

    With ``weights[t]`` the first coordinate of token ``t``, p(class 1) = sigmoid(sum of the weights present).
    """

    def __init__(self, weights, dim: int = 2):
        super().__init__()
        self.emb = nn.Embedding(len(weights), dim)
        with torch.no_grad():
            self.emb.weight.zero_()
            self.emb.weight[:, 0] = torch.as_tensor(weights, dtype=torch.float32)
            self.emb.weight[:, 1:] = 0.7
        self.head = nn.Linear(dim, 2, bias=False)
        with torch.no_grad():
            self.head.weight.zero_()
            self.head.weight[1, 0] = 1.0

    def forward_embeds(self, embeds, mask):
        return self.head((embeds * mask.unsqueeze(-1).to(embeds.dtype)).sum(dim=1))

    def forward(self, input_ids, attention_mask):
        return self.forward_embeds(self.emb(input_ids), attention_mask)


# token ids: 0 PAD, 1 CLS, 2 MASK, 3 A, 4 B, 5 C, 6 D
W = [0.0, 0.2, 0.0, 2.0, -0.5, 1.0, 0.4]


def toy():
    model = BagOfEmbeddings(W).eval()
    return model, (lambda ids, mask: model(ids, mask)), (lambda e, m: model.forward_embeds(e, m))


def batch(tokens, pad_to=None):
    ids = torch.tensor([tokens + [PAD] * ((pad_to or len(tokens)) - len(tokens))])
    mask = (ids != PAD).long()
    special = (ids == CLS).long()
    return ids, mask, special


# --------------------------------------------------------------------------- soft metrics
def test_normalized_importance_is_min_max_over_real_tokens():
    scores = torch.tensor([[9.0, 3.0, 1.0, 2.0], [5.0, 4.0, 4.0, 0.0]])
    real = torch.tensor([[False, True, True, True], [False, True, True, False]])
    a = normalized_importance(scores, real)
    assert torch.allclose(a[0], torch.tensor([0.0, 1.0, 0.0, 0.5], dtype=torch.float64))
    assert torch.allclose(a[1], torch.tensor([0.0, 0.5, 0.5, 0.0], dtype=torch.float64))  # flat row: 0.5


def test_soft_comprehensiveness_by_hand_with_deterministic_masks():
    model, _, fwd = toy()
    ids, mask, special = batch([CLS, 3, 4])  # A (w 2.0), B (w -0.5)
    scores = torch.tensor([[0.0, 5.0, 1.0]])  # a = (1, 0): A always erased, B always kept
    p0, p_drop, p_null = sig(0.2 + 2.0 - 0.5), sig(0.2 - 0.5), sig(0.2)
    raw = soft_comprehensiveness(fwd, model.emb(ids), mask, special, scores, normalize=False, n_samples=3)
    assert raw.item() == pytest.approx(p0 - p_drop, abs=1e-6)
    s_null = 1 - max(0.0, p0 - p_null)
    norm = soft_comprehensiveness(fwd, model.emb(ids), mask, special, scores, n_samples=3)
    assert norm.item() == pytest.approx((p0 - p_drop) / (1 - s_null), abs=1e-6)


def test_soft_sufficiency_by_hand_with_deterministic_masks():
    model, _, fwd = toy()
    ids, mask, special = batch([CLS, 3, 4])
    scores = torch.tensor([[0.0, 1.0, 5.0]])  # a = (0, 1): only B survives
    p0, p_keep, p_null = sig(1.7), sig(0.2 - 0.5), sig(0.2)
    soft_s = 1 - max(0.0, p0 - p_keep)
    s_null = 1 - max(0.0, p0 - p_null)
    raw = soft_sufficiency(fwd, model.emb(ids), mask, special, scores, normalize=False)
    assert raw.item() == pytest.approx(soft_s, abs=1e-6)
    norm = soft_sufficiency(fwd, model.emb(ids), mask, special, scores)
    assert norm.item() == pytest.approx((soft_s - s_null) / (1 - s_null), abs=1e-6)


def test_soft_comprehensiveness_averages_the_bernoulli_masks():
    """Equal scores give a = 0.5: each token's logit coordinate survives with probability 1/2 (4 outcomes)."""
    model, _, fwd = toy()
    ids, mask, special = batch([CLS, 3, 5])  # A (2.0), C (1.0)
    scores = torch.tensor([[0.0, 1.0, 1.0]])
    p0 = sig(3.2)
    outcomes = [max(0.0, p0 - sig(0.2 + ka * 2.0 + kc * 1.0)) for ka in (0, 1) for kc in (0, 1)]
    expected = sum(outcomes) / 4
    sd = math.sqrt(sum((o - expected) ** 2 for o in outcomes) / 4)
    n = 3000
    got = soft_comprehensiveness(fwd, model.emb(ids), mask, special, scores, normalize=False, n_samples=n, seed=3)
    assert abs(got.item() - expected) < 5 * sd / math.sqrt(n)
    again = soft_comprehensiveness(fwd, model.emb(ids), mask, special, scores, normalize=False, n_samples=n, seed=3)
    assert torch.equal(got, again)
    other = soft_comprehensiveness(fwd, model.emb(ids), mask, special, scores, normalize=False, n_samples=n, seed=4)
    assert not torch.equal(got, other)


def test_soft_metrics_never_touch_padding_or_special_tokens():
    model, _, fwd = toy()
    ids, mask, special = batch([CLS, 3, 4], pad_to=5)
    emb = model.emb(ids)
    emb[0, 3:] = 100.0  # padding embeddings: the model ignores them through the mask
    scores = torch.tensor([[0.0, 5.0, 1.0, -7.0, 9.0]])
    raw = soft_comprehensiveness(fwd, emb, mask, special, scores, normalize=False)
    assert raw.item() == pytest.approx(sig(1.7) - sig(-0.3), abs=1e-6)  # CLS kept, A erased, B kept


# --------------------------------------------------------------------------- normalised AOPC
def _aopc_of(order, tokens, weights_of, p0):
    """AOPC of removing ``order`` one token at a time from a bag of tokens, by the sigmoid formula."""
    remaining = list(tokens)
    drops = [0.0]
    for tok in order:
        remaining.remove(tok)
        drops.append(p0 - sig(weights_of(remaining)))
    return sum(drops) / (len(order) + 1)


def test_normalized_aopc_by_hand_on_an_additive_model():
    _, fwd, _ = toy()
    ids, mask, special = batch([CLS, 3, 4, 5])
    tokens = [3, 4, 5]

    def weight(rem):
        return W[CLS] + sum(W[t] for t in rem)

    p0 = sig(weight(tokens))
    all_aopc = [_aopc_of(perm, tokens, weight, p0) for perm in itertools.permutations(tokens)]
    scores = torch.tensor([[0.0, 1.0, 3.0, 2.0]])  # order B, C, A: a poor explanation
    own = _aopc_of([4, 5, 3], tokens, weight, p0)
    expected = (own - min(all_aopc)) / (max(all_aopc) - min(all_aopc))
    for width in (1, 3):  # greedy is exact on an additive model
        res = normalized_aopc(fwd, ids, mask, special, scores, beam_width=width)
        assert res.aopc.item() == pytest.approx(own, abs=1e-6)
        assert res.upper.item() == pytest.approx(max(all_aopc), abs=1e-6)
        assert res.lower.item() == pytest.approx(min(all_aopc), abs=1e-6)
        assert res.naopc.item() == pytest.approx(expected, abs=1e-6)
    best = normalized_aopc(fwd, ids, mask, special, torch.tensor([[0.0, 3.0, 1.0, 2.0]]))
    assert best.naopc.item() == pytest.approx(1.0, abs=1e-9)
    # [MASK] has weight 0 here: replacing equals deleting
    replaced = normalized_aopc(fwd, ids, mask, special, scores, mode="replace", replacement_id=MASK)
    assert replaced.naopc.item() == pytest.approx(expected, abs=1e-6)


def interaction_forward(ids, mask):
    """Class-1 logit = 3 [A and B both present] + 1 [C present] - 1; tokens interact."""
    present = lambda t: ((ids == t) & mask.bool()).any(dim=1).float()  # noqa: E731
    logit = 3 * present(3) * present(4) + present(5) - 1
    return torch.stack([torch.zeros_like(logit), logit], dim=1)


def test_normalized_aopc_beam_is_exact_when_wide_and_inside_the_exact_bounds_when_greedy():
    ids, mask, special = batch([CLS, 3, 4, 5, 6])
    tokens = [3, 4, 5, 6]

    def weight(rem):
        return 3.0 * (3 in rem and 4 in rem) + (5 in rem) - 1

    p0 = sig(weight(tokens))
    all_aopc = [_aopc_of(perm, tokens, weight, p0) for perm in itertools.permutations(tokens)]
    scores = torch.tensor([[0.0, 4.0, 1.0, 3.0, 2.0]])  # A, C, D, B
    own = _aopc_of([3, 5, 6, 4], tokens, weight, p0)
    wide = normalized_aopc(interaction_forward, ids, mask, special, scores, beam_width=6)
    assert wide.upper.item() == pytest.approx(max(all_aopc), abs=1e-6)
    assert wide.lower.item() == pytest.approx(min(all_aopc), abs=1e-6)
    assert wide.naopc.item() == pytest.approx((own - min(all_aopc)) / (max(all_aopc) - min(all_aopc)), abs=1e-6)
    greedy = normalized_aopc(interaction_forward, ids, mask, special, scores, beam_width=1)
    assert min(all_aopc) - 1e-9 <= greedy.lower.item() <= greedy.upper.item() <= max(all_aopc) + 1e-9
    assert 0.0 <= greedy.naopc.item() <= 1.0


def test_normalized_aopc_least_order_and_single_token():
    _, fwd, _ = toy()
    ids, mask, special = batch([CLS, 3, 4, 5])
    scores = torch.tensor([[0.0, 3.0, 1.0, 2.0]])  # least relevant first: B, C, A = the worst-case ordering
    res = normalized_aopc(fwd, ids, mask, special, scores, order="least")
    assert res.naopc.item() == pytest.approx(0.0, abs=1e-9)
    one = normalized_aopc(fwd, *batch([CLS, 3])[:2], batch([CLS, 3])[2], torch.tensor([[0.0, 1.0]]))
    assert math.isnan(one.naopc.item())  # one ordering only: no range to normalise by


# --------------------------------------------------------------------------- F-Fidelity
def test_f_fidelity_without_finetuning_is_deletion_by_hand():
    """steps=0 and mask_rate=1: Fid+ removes the whole top-alpha set, Fid- every other token."""
    model, _, _ = toy()
    ids, mask, special = batch([CLS, 3, 4, 5, 6])  # A 2.0, B -0.5, C 1.0, D 0.4
    scores = torch.tensor([[0.0, 4.0, 1.0, 3.0, 2.0]])  # ranking A, C, D, B
    res = f_fidelity(model, ids, mask, special, scores, fractions=(0.25, 0.5), mask_rate=1.0, steps=0,
                     n_samples=2, forward_func=lambda m, i, a: m(i, a))
    total = 0.2 + 2.0 - 0.5 + 1.0 + 0.4
    p0 = sig(total)
    plus = [p0 - sig(total - 2.0), p0 - sig(total - 3.0)]
    minus = [p0 - sig(0.2 + 2.0), p0 - sig(0.2 + 3.0)]
    assert res.per_fraction_plus[0].tolist() == pytest.approx(plus, abs=1e-6)
    assert res.per_fraction_minus[0].tolist() == pytest.approx(minus, abs=1e-6)
    assert res.fid_plus.item() == pytest.approx(sum(plus) / 2, abs=1e-6)
    assert res.fid_minus.item() == pytest.approx(sum(minus) / 2, abs=1e-6)
    # the same numbers as the hard ERASER metrics at those bins
    comp = comprehensiveness(lambda i, a: model(i, a), ids, mask, special, scores, bins=(0.25, 0.5))
    suff = sufficiency(lambda i, a: model(i, a), ids, mask, special, scores, bins=(0.25, 0.5))
    assert torch.allclose(res.per_fraction_plus.float(), comp.per_bin.float(), atol=1e-6)
    assert torch.allclose(res.per_fraction_minus.float(), suff.per_bin.float(), atol=1e-6)


def test_f_fidelity_removes_a_random_subset_within_the_mask_rate():
    """alpha = 0.5 of 4 tokens selects {A, C}; mask_rate 0.25 removes one of them, chosen at random."""
    model, _, _ = toy()
    ids, mask, special = batch([CLS, 3, 4, 5, 6])
    scores = torch.tensor([[0.0, 4.0, 1.0, 3.0, 2.0]])
    total = 3.1
    p0 = sig(total)
    outcomes = [p0 - sig(total - 2.0), p0 - sig(total - 1.0)]
    n = 2000
    res = f_fidelity(model, ids, mask, special, scores, fractions=(0.5,), mask_rate=0.25, steps=0,
                     n_samples=n, forward_func=lambda m, i, a: m(i, a), seed=5)
    sd = abs(outcomes[0] - outcomes[1]) / 2
    assert abs(res.fid_plus.item() - sum(outcomes) / 2) < 5 * sd / math.sqrt(n)
    rest = [p0 - sig(total + 0.5), p0 - sig(total - 0.4)]  # one of B, D removed
    sd = abs(rest[0] - rest[1]) / 2
    assert abs(res.fid_minus.item() - sum(rest) / 2) < 5 * sd / math.sqrt(n)


def _snapshot(model):
    return ({k: v.detach().clone() for k, v in model.state_dict().items()},
            {k: p.requires_grad for k, p in model.named_parameters()},
            {k: m.training for k, m in model.named_modules()})


def test_f_fidelity_never_modifies_the_users_model(tiny):
    model, tokenizer = tiny
    model.train()  # dropout on, as a user might leave it
    model.bert.embeddings.eval()
    model.classifier.weight.requires_grad_(False)
    try:
        enc = tokenizer(["good fine film", "bad awful plot here"], return_tensors="pt", padding=True,
                        return_special_tokens_mask=True)
        ids, mask, special = enc["input_ids"], enc["attention_mask"], enc["special_tokens_mask"]
        before = _snapshot(model)
        scores = torch.rand(ids.shape, generator=torch.Generator().manual_seed(0))
        rng_before = torch.get_rng_state()
        tuned = random_mask_finetune(model, ids, mask, special_tokens_mask=special, steps=3, lr=1e-2,
                                     mask_rate=0.5, train_batch_size=2)
        res = f_fidelity(model, ids, mask, special, scores, finetuned=tuned, n_samples=2)
        res2 = f_fidelity(model, ids, mask, special, scores, steps=2, lr=1e-2, n_samples=2)
        after = _snapshot(model)
        assert torch.equal(torch.get_rng_state(), rng_before)  # the copy's dropout drew from a forked generator
        for key, value in before[0].items():
            assert torch.equal(value, after[0][key]), key
        assert before[1] == after[1] and before[2] == after[2]
        assert any(not torch.equal(p, tuned.state_dict()[k]) for k, p in before[0].items())
        assert not tuned.training and not any(p.requires_grad for p in tuned.parameters())
        assert torch.isfinite(res.fid_plus).all() and torch.isfinite(res2.fid_minus).all()
    finally:
        model.eval()
        model.classifier.weight.requires_grad_(True)


def test_f_fidelity_refuses_the_users_model_as_the_copy():
    model, _, _ = toy()
    ids, mask, special = batch([CLS, 3, 4])
    with pytest.raises(PRXAIError) as err:
        f_fidelity(model, ids, mask, special, torch.ones(1, 3), finetuned=model)
    assert str(err.value) == "finetuned is the user's model itself; pass the copy returned by random_mask_finetune."


# --------------------------------------------------------------------------- replacement token
class _FakeTokenizer:
    def __init__(self, mask_token_id=None, space=(), unk=None, eos=None):
        self.mask_token_id, self._space, self.unk_token_id, self.eos_token_id = mask_token_id, space, unk, eos

    def encode(self, text, add_special_tokens=True):
        assert text == " "
        return list(self._space)


def test_replacement_token_id_mask_for_encoders_space_for_decoders(tiny, tiny_decoder):
    assert replacement_token_id(tiny[1]) == tiny[1].mask_token_id == 4
    assert replacement_token_id(_FakeTokenizer(space=[220], eos=50256)) == 220  # GPT-2's "Ġ"
    assert replacement_token_id(_FakeTokenizer(mask_token_id=4, space=[9]), causal=True) == 9
    assert replacement_token_id(tiny_decoder[1]) == tiny_decoder[1].unk_token_id  # a space is no token there
    assert replacement_token_id(_FakeTokenizer(space=[5, 6], eos=7)) == 7
    with pytest.raises(PRXAIError) as err:
        replacement_token_id(_FakeTokenizer(space=[5]), causal=False)
    assert str(err.value).startswith("replacement_token_id: causal=False but the tokenizer has no mask token")


def test_deletion_with_the_mask_token_by_hand():
    """mode='replace' with [MASK] (weight 0 here) keeps the positions: comprehensiveness by hand."""
    model, fwd, _ = toy()
    ids, mask, special = batch([CLS, 3, 4, 5, 6])
    scores = torch.tensor([[0.0, 4.0, 1.0, 3.0, 2.0]])
    rid = replacement_token_id(_FakeTokenizer(mask_token_id=MASK))
    res = comprehensiveness(fwd, ids, mask, special, scores, bins=(0.25, 0.5), mode="replace", replacement_id=rid)
    p0 = sig(3.1)
    assert res.per_bin[0].tolist() == pytest.approx([p0 - sig(1.1), p0 - sig(0.1)], abs=1e-6)


# --------------------------------------------------------------------------- bad input
def _calls():
    model, fwd, efwd = toy()
    return {
        "soft_comprehensiveness": lambda ids, mask, sp, sc: soft_comprehensiveness(efwd, model.emb(ids), mask, sp, sc),
        "soft_sufficiency": lambda ids, mask, sp, sc: soft_sufficiency(efwd, model.emb(ids), mask, sp, sc),
        "normalized_aopc": lambda ids, mask, sp, sc: normalized_aopc(fwd, ids, mask, sp, sc),
        "f_fidelity": lambda ids, mask, sp, sc: f_fidelity(model, ids, mask, sp, sc, steps=0,
                                                           forward_func=lambda m, i, a: m(i, a)),
    }


@pytest.mark.parametrize("name", ["soft_comprehensiveness", "soft_sufficiency", "normalized_aopc", "f_fidelity"])
def test_new_metrics_refuse_bad_input(name):
    call = _calls()[name]
    ids = torch.tensor([[CLS, 3, 4, 5], [CLS, 4, 5, PAD]])
    mask = (ids != PAD).long()
    special = (ids == CLS).long()
    scores = torch.rand(2, 4)
    with pytest.raises(PRXAIError) as err:
        call(ids, mask, special, scores[:, :3])
    assert str(err.value) == ("scores has shape (2, 3) but input_ids has shape (2, 4); "
                              "all per-token tensors must have the same (batch, tokens) shape.")
    with pytest.raises(PRXAIError) as err:
        call(ids, mask[:1], special, scores)
    assert str(err.value) == ("attention_mask has shape (1, 4) but input_ids has shape (2, 4); "
                              "all per-token tensors must have the same (batch, tokens) shape.")
    empty = mask.clone()
    empty[1] = 0
    with pytest.raises(PRXAIError) as err:
        call(ids, empty, special, scores)
    assert str(err.value) == (f"{name}: row 1 of attention_mask (less special tokens) has no token to perturb: "
                              "every position is padding or a special token. Drop such examples (or fix the "
                              "mask: 1 for tokens, 0 for padding).")
    for bad in (float("nan"), float("inf")):
        nonfinite = scores.clone()
        nonfinite[0, 2] = bad
        with pytest.raises(PRXAIError) as err:
            call(ids, mask, special, nonfinite)
        assert str(err.value) == (f"{name}: scores of row 0 contain NaN or infinite values on real tokens; "
                                  "check the attribution method's output.")
    padded = scores.clone()
    padded[1, 3] = float("nan")  # on padding: ignored
    call(ids, mask, special, padded)


def test_soft_metrics_refuse_token_ids_instead_of_embeddings():
    _, _, efwd = toy()
    ids, mask, special = batch([CLS, 3, 4])
    with pytest.raises(PRXAIError) as err:
        soft_comprehensiveness(efwd, ids, mask, special, torch.ones(1, 3))
    assert str(err.value) == ("soft_comprehensiveness: inputs_embeds must be a (batch, tokens, hidden) tensor, "
                              "got (1, 3); embed the token ids first (e.g. model.get_input_embeddings()(input_ids)).")


def test_new_metrics_refuse_bad_settings():
    model, fwd, efwd = toy()
    ids, mask, special = batch([CLS, 3, 4])
    scores = torch.ones(1, 3)
    with pytest.raises(PRXAIError, match=r"^n_samples must be a positive integer, got 0\.$"):
        soft_sufficiency(efwd, model.emb(ids), mask, special, scores, n_samples=0)
    with pytest.raises(PRXAIError, match=r"^beam_width must be a positive integer, got 0\.$"):
        normalized_aopc(fwd, ids, mask, special, scores, beam_width=0)
    with pytest.raises(PRXAIError, match=r"^mask_rate must be a fraction in \(0, 1\], got 1\.5\.$"):
        f_fidelity(model, ids, mask, special, scores, mask_rate=1.5, steps=0)
