"""The special-token-mass study's helpers (benchmarks/special_token_mass.py)."""
import torch


def test_renormalised_zeroes_special_tokens_and_keeps_the_order_of_signed_scores(benchmark_script):
    study = benchmark_script("special_token_mass.py")
    # a two-walk score: the explained token first, one negative word; the ordinary scores sum to 0.1
    scores = torch.tensor([[0.5, 0.3, -0.2, 0.1, -0.1, 0.05]])
    special = torch.tensor([True, False, False, False, False, True])
    out = study.renormalised(scores, special)
    assert out[0, 0] == 0 and out[0, -1] == 0
    assert torch.isclose(out.abs().sum(), torch.tensor(1.0))
    # dividing by the plain sum (0.1) would keep the order here; with a negative sum it would reverse it
    ordinary = out[0, 1:5]
    assert torch.equal(torch.argsort(ordinary), torch.argsort(scores[0, 1:5]))
    flipped = study.renormalised(torch.tensor([[0.5, 0.1, -0.3, 0.05]]), torch.tensor([True, False, False, False]))
    assert torch.equal(torch.argsort(flipped[0, 1:]), torch.argsort(torch.tensor([0.1, -0.3, 0.05])))


def test_rank_follows_the_mask_the_metrics_get(benchmark_script):
    from types import SimpleNamespace

    study = benchmark_script("special_token_mass.py")
    enc = SimpleNamespace(mask=torch.ones(1, 4, dtype=torch.long), special=torch.zeros(1, 4, dtype=torch.bool))
    scores = torch.tensor([[0.1, 0.2, 0.05, 0.6]])  # the last token (a decoder's explained one) scores highest
    assert study.rank_among_real(scores, enc, 3, enc.special) == 1
    protected = torch.tensor([[False, False, False, True]])
    assert study.rank_among_real(scores, enc, 3, protected) == 0
    assert study.rank_among_real(scores, enc, 1, protected) == 1


def test_labels_name_each_cells_resolved_default(benchmark_script):
    study = benchmark_script("special_token_mass.py")
    res = {"default_label": "PR-TAG± (λ=0.25)"}
    assert study.label(res, study.DEFAULT) == "PR-TAG± (λ=0.25) (default)"
    assert study.label(res, "pr-tag") == "PR-TAG (one walk)"
    assert study.DEFAULT in study.METHODS and "pr-g" not in study.METHODS
