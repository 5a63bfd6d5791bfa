"""End-to-end tests of the benchmark runner, the method registry and the command."""

import csv
import json

import pytest
import torch
from torch import nn

from captum_prxai.bench import (
    METHODS,
    BenchmarkConfig,
    Explainer,
    MethodContext,
    available_methods,
    build_method,
    make_forward_func,
    parse_methods,
    register_method,
    run_benchmark,
    select_examples,
)
from captum_prxai.exceptions import PRXAIError

#: Toy reviews in the words of the tiny tokenizer (``tiny`` in tests/conftest.py).
DATA = [
    ("the movie was very good", 1),
    ("a boring plot", 0),
    ("not a great film , awful", 0),
    ("fun", 1),
    ("the plot is bad", 0),
]


def _table_labels(markdown: str) -> list:
    """Method labels of the first (main) table."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Method"))
    labels = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        labels.append(line.split("|")[1].strip())
    return labels


def test_runner_end_to_end_and_resume(tiny, tmp_path):
    model, tokenizer = tiny
    methods = ["pr-ag", "ig", "random"]
    out = tmp_path / "out"
    result = run_benchmark(model, tokenizer, DATA, methods, n=3, out_dir=out, progress=False,
                           method_options={"ig": {"n_steps": 8}})
    assert result.errors == []
    assert result.n_computed == 9 and result.n_cached == 0
    for name in ("cache.jsonl", "results.csv", "summary.md", "summary.json", "deletion_curves.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    with (out / "results.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 9 and {r["method"] for r in rows} == set(methods)
    assert len({r["example"] for r in rows}) == 3
    for r in rows:
        assert -1.0 <= float(r["comprehensiveness"]) <= 1.0
        assert float(r["accuracy"]) in (0.0, 1.0)
    labels = _table_labels((out / "summary.md").read_text())
    assert labels == [METHODS[m].label for m in methods]
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["methods"]) == methods
    ig_comp = summary["methods"]["ig"]["comprehensiveness"]
    assert ig_comp["n"] == 3
    assert ig_comp["ci95_low"] <= ig_comp["mean"] <= ig_comp["ci95_high"]
    cache_lines = (out / "cache.jsonl").read_text().splitlines()
    assert len(cache_lines) == 9
    rec = json.loads(cache_lines[0])
    assert len(rec["tokens"]) == len(rec["scores"]) == rec["n_tokens"]
    assert len(rec["curve_most"]) == 11 and rec["curve_most"][0] == pytest.approx(rec["prob"])

    # Second run: everything comes from the cache and the numbers are identical.
    again = run_benchmark(model, tokenizer, DATA, methods, n=3, out_dir=out, progress=False,
                          method_options={"ig": {"n_steps": 8}})
    assert again.n_computed == 0 and again.n_cached == 9
    assert len((out / "cache.jsonl").read_text().splitlines()) == 9
    assert again.summary["pr-ag"]["comprehensiveness"] == result.summary["pr-ag"]["comprehensiveness"]

    # Adding a method computes only that method; other settings invalidate the cache.
    more = run_benchmark(model, tokenizer, DATA, methods + ["ixg"], n=3, out_dir=out, progress=False,
                         method_options={"ig": {"n_steps": 8}})
    assert more.n_computed == 3 and more.n_cached == 9
    assert _table_labels((out / "summary.md").read_text())[-1] == METHODS["ixg"].label
    replaced = run_benchmark(model, tokenizer, DATA, ["random"], n=3, out_dir=out, progress=False,
                             mode="replace", replacement="mask", method_options={"ig": {"n_steps": 8}})
    assert replaced.n_computed == 3


def test_an_interrupted_run_is_the_sample_of_a_smaller_n(tiny, tmp_path):
    model, tokenizer = tiny
    out = tmp_path / "out"
    calls = []

    def counting(ids, mask):
        calls.append(1)
        if len(calls) > 12:  # stop part-way through the run of n=5
            raise KeyboardInterrupt
        return model(ids, attention_mask=mask).logits

    with pytest.raises(KeyboardInterrupt):
        run_benchmark(model, tokenizer, DATA, ["random"], n=5, out_dir=out, progress=False, plot=False,
                      forward_func=counting)
    finished = len((out / "cache.jsonl").read_text().splitlines())
    assert 0 < finished < 5
    smaller = run_benchmark(model, tokenizer, DATA, ["random"], n=finished, out_dir=out, progress=False, plot=False,
                            forward_func=lambda i, m: model(i, attention_mask=m).logits)
    assert smaller.n_computed == 0 and smaller.n_cached == finished
    assert sorted(r["example"] for r in smaller.records) == select_examples(len(DATA), finished)


def test_runner_interrupted_cache_line_is_skipped(tiny, tmp_path):
    model, tokenizer = tiny
    out = tmp_path / "out"
    run_benchmark(model, tokenizer, DATA, ["random"], n=2, out_dir=out, progress=False, plot=False)
    with (out / "cache.jsonl").open("a") as fh:
        fh.write('{"config_key": "trunc')  # a write cut short
    with pytest.warns(UserWarning, match="damaged"):
        res = run_benchmark(model, tokenizer, DATA, ["random"], n=2, out_dir=out, progress=False, plot=False)
    assert res.n_cached == 2 and res.n_computed == 0


def test_failing_method_is_reported_not_cached(tiny, tmp_path):
    model, tokenizer = tiny

    def factory(model, forward, ctx):
        def explain(ids, mask, special, target):
            raise RuntimeError("boom")

        return Explainer("test-broken", "Broken", explain)

    register_method("test-broken", "Broken", "control", "always fails", factory)
    try:
        res = run_benchmark(model, tokenizer, DATA, ["test-broken", "random"], n=2, out_dir=tmp_path,
                            progress=False, plot=False)
        assert len(res.errors) == 2 and all("boom" in e[2] for e in res.errors)
        assert res.n_computed == 2  # random still ran
        assert "2 explanation(s) failed" in (tmp_path / "summary.md").read_text()
        cache = [json.loads(x) for x in (tmp_path / "cache.jsonl").read_text().splitlines()]
        assert {r["method"] for r in cache} == {"random"}
    finally:
        del METHODS["test-broken"]


def test_runner_accepts_text_dataset_and_validates(tiny, tmp_path):
    from captum_prxai.data import TextDataset

    model, tokenizer = tiny
    ds = TextDataset("toy", "test", [t for t, _ in DATA], [y for _, y in DATA], ["neg", "pos"])
    res = run_benchmark(model, tokenizer, ds, "random,attention", n=None, out_dir=tmp_path, progress=False,
                        plot=False)
    assert res.methods == ["random", "raw-attention"]
    assert len({r["example"] for r in res.records}) == len(DATA)
    assert "**toy**" in (tmp_path / "summary.md").read_text()
    with pytest.raises(PRXAIError, match="unknown method"):
        run_benchmark(model, tokenizer, DATA, ["nope"], n=1, out_dir=tmp_path, progress=False)
    with pytest.raises(PRXAIError, match="empty"):
        run_benchmark(model, tokenizer, [], ["random"], n=1, out_dir=tmp_path, progress=False)
    with pytest.raises(PRXAIError, match="mode"):
        run_benchmark(model, tokenizer, DATA, ["random"], n=1, out_dir=tmp_path, progress=False, mode="drop")


def test_select_examples_is_seeded_and_bounded():
    a = select_examples(100, 10, seed=0)
    assert a == select_examples(100, 10, seed=0) and len(set(a)) == 10
    assert a != select_examples(100, 10, seed=1)
    assert select_examples(5, 10) == [0, 1, 2, 3, 4]
    with pytest.raises(PRXAIError):
        select_examples(5, 0)


def test_registry_names_and_aliases():
    names = available_methods()
    for required in ("pr-a", "pr-g", "pr-ag", "raw-attention", "rollout", "gae", "ig", "ixg", "saliency",
                     "occlusion", "feature-ablation", "shapley", "kernel-shap", "lime", "random"):
        assert required in names
    assert parse_methods("PR-AG, grad-rollout,attention,pr-ag") == ["pr-ag", "gae", "raw-attention"]
    with pytest.raises(PRXAIError, match="choose from"):
        parse_methods("pr-ag,magic")
    with pytest.raises(PRXAIError, match="already registered"):
        register_method("ig", "x", "gradient", "dup", lambda *a: None)


class _Out:
    def __init__(self, logits):
        self.logits = logits


class AdditiveHF(nn.Module):
    """HF-like classifier: class-1 logit = sum of per-token weights, class-0 logit = 0."""

    def __init__(self, weights):
        super().__init__()
        self.emb = nn.Embedding(len(weights), 1)
        with torch.no_grad():
            self.emb.weight.copy_(torch.as_tensor(weights, dtype=torch.float32).view(-1, 1))

    def get_input_embeddings(self):
        return self.emb

    def forward(self, input_ids, attention_mask):
        s = (self.emb(input_ids).squeeze(-1) * attention_mask.float()).sum(1)
        return _Out(torch.stack([torch.zeros_like(s), s], dim=1))


@pytest.mark.parametrize("method", ["ig", "ixg", "feature-ablation", "shapley", "kernel-shap"])
def test_captum_methods_recover_additive_weights(method):
    weights = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 1.0, -2.0, 0.5, 3.0, -0.25])
    model = AdditiveHF(weights).eval()
    ids = torch.tensor([[2, 5, 6, 7, 8, 9, 3]])
    mask = torch.ones_like(ids)
    special = torch.tensor([[1, 0, 0, 0, 0, 0, 1]])
    ctx = MethodContext(pad_token_id=0, mask_token_id=4, options={"shapley": {"n_samples": 3}})
    torch.manual_seed(0)
    scores = build_method(method, model, make_forward_func(model), ctx)(ids, mask, special, torch.tensor([1]))
    assert scores.shape == ids.shape
    # With a zero-weight [PAD] reference, every method is exact on an additive model.
    assert torch.allclose(scores[0, 1:-1], weights[ids[0, 1:-1]], atol=1e-4), scores


def test_lime_and_saliency_rank_additive_weights():
    weights = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 1.0, -2.0, 0.5, 3.0, -0.25])
    model = AdditiveHF(weights).eval()
    ids = torch.tensor([[2, 5, 6, 7, 8, 9, 3]])
    mask, special = torch.ones_like(ids), torch.tensor([[1, 0, 0, 0, 0, 0, 1]])
    ctx = MethodContext(pad_token_id=0, options={"lime": {"n_samples": 300}})
    torch.manual_seed(0)
    lime = build_method("lime", model, make_forward_func(model), ctx)(ids, mask, special, torch.tensor([1]))
    assert lime[0, 1:-1].argsort().tolist() == weights[ids[0, 1:-1]].argsort().tolist()
    assert lime[0, 0] == 0 and lime[0, -1] == 0  # special tokens get no score
    sal = build_method("saliency", model, make_forward_func(model), ctx)(ids, mask, special, torch.tensor([1]))
    assert torch.allclose(sal[0], torch.ones(7))  # |d logit / d embedding| = 1 for every attended token


def test_random_method_is_deterministic_per_input():
    ctx = MethodContext(seed=3)
    rnd = build_method("random", nn.Linear(1, 1), lambda i, m: None, ctx)
    ids = torch.tensor([[2, 5, 6, 3]])
    one = rnd(ids, torch.ones_like(ids), torch.zeros_like(ids), torch.tensor([0]))
    assert torch.equal(one, rnd(ids, torch.ones_like(ids), torch.zeros_like(ids), torch.tensor([0])))
    other = build_method("random", nn.Linear(1, 1), lambda i, m: None, MethodContext(seed=4))
    assert not torch.equal(one, other(ids, torch.ones_like(ids), torch.zeros_like(ids), torch.tensor([0])))


def test_cli_benchmark(tiny, tmp_path, monkeypatch, capsys):
    from captum_prxai import cli
    from captum_prxai import data as data_module
    from captum_prxai.data import TextDataset

    model, tokenizer = tiny
    ckpt = tmp_path / "ckpt"
    model.save_pretrained(ckpt)
    tokenizer.save_pretrained(ckpt)

    def fake_load_dataset(name, split="test"):
        assert name == "toy" and split == "test"
        return TextDataset("toy", split, [t for t, _ in DATA], [y for _, y in DATA], ["neg", "pos"])

    monkeypatch.setattr(data_module, "load_dataset", fake_load_dataset)
    out = tmp_path / "bench"
    argv = ["benchmark", "--model", str(ckpt), "--dataset", "toy", "--methods", "random,rollout", "--n", "2",
            "--out", str(out), "--max-length", "16", "--device", "cpu", "--quiet", "--no-plot"]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "| Random |" in text and "| Rollout |" in text and "4 explanations computed" in text
    assert cli.main(argv) == 0
    assert "0 explanations computed, 4 read" in capsys.readouterr().out
    assert cli.main(["benchmark", "--list-methods"]) == 0
    assert "pr-ag" in capsys.readouterr().out
    assert cli.main(argv + ["--option", "ig"]) == 2
    assert "METHOD.KEY=VALUE" in capsys.readouterr().err

    # scores computed elsewhere join the same table
    first = tokenizer(DATA[0][0], truncation=True, max_length=16)["input_ids"]
    ext = tmp_path / "ext.jsonl"
    ext.write_text(json.dumps({"input_ids": first, "scores": [1.0] * len(first)}) + "\n")
    ext_argv = ["benchmark", "--model", str(ckpt), "--dataset", "toy", "--methods", "ext", "--n", str(len(DATA)),
                "--out", str(tmp_path / "ext"), "--max-length", "16", "--device", "cpu", "--quiet", "--no-plot",
                "--precomputed", f"ext={ext}"]
    try:
        assert cli.main(ext_argv) == 1  # the other examples have no scores: reported, not a crash
        out_text = capsys.readouterr().out
        assert "| ext |" in out_text and "1 explanations computed" in out_text and "has no scores" in out_text
    finally:
        METHODS.pop("ext", None)  # the registry is global: leave it as found
    assert cli.main(ext_argv[:-1] + ["ext"]) == 2
    assert "NAME=FILE" in capsys.readouterr().err


def test_record_key_changes_with_every_part():
    from captum_prxai.bench.cache import record_key

    parts = {"metrics": BenchmarkConfig().metric_fields(), "model": {"weights": "a"}, "method": {"options": {}}}
    a = record_key(parts)
    assert a == record_key(dict(reversed(list(parts.items()))))  # order does not matter
    assert a != record_key({**parts, "metrics": BenchmarkConfig(mode="replace").metric_fields()})
    assert a != record_key({**parts, "model": {"weights": "b"}})
    assert a != record_key({**parts, "method": {"options": {"n_steps": 5}}})
    # in "delete" mode the replacement token is unused, so it does not split the cache
    assert BenchmarkConfig(replacement="pad").metric_fields() == BenchmarkConfig().metric_fields()


def test_captum_infidelity_and_sensitivity_with_pr_method(tiny):
    """The docs/metrics.md recipe: Captum metrics with token perturbations and a PR-XAI method."""
    from captum.metrics import infidelity, sensitivity_max

    from captum_prxai import PRAttentionGradient, attention_layers
    from captum_prxai.metrics import (
        probability_forward,
        token_explanation_func,
        token_infidelity_perturb_func,
        token_sensitivity_perturb_func,
    )

    model, tokenizer = tiny
    enc = tokenizer([t for t, _ in DATA[:2]], padding=True, return_tensors="pt")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    forward = make_forward_func(model)
    pr = PRAttentionGradient(forward, attention_layers(model))
    scores = pr.attribute(ids, target=1, additional_forward_args=(mask,))
    special = tokenizer.all_special_ids
    infid = infidelity(probability_forward(forward),
                       token_infidelity_perturb_func(tokenizer.mask_token_id, special, fraction=0.3, seed=0),
                       ids, scores, additional_forward_args=(mask,), target=1, n_perturb_samples=3)
    assert infid.shape == (2,) and torch.isfinite(infid).all() and (infid >= 0).all()
    sens = sensitivity_max(token_explanation_func(pr.attribute), ids,
                           token_sensitivity_perturb_func(tokenizer.mask_token_id, special, seed=0),
                           n_perturb_samples=3, target=1, additional_forward_args=(mask,))
    # Replacing a token by [MASK] changes the attention graph, so the PageRank scores move.
    assert sens.shape == (2,) and (sens > 0).all() and torch.isfinite(sens).all()


def test_ablation_variant_names_match_their_settings():
    """A variant named ...:0.85 runs at damping 0.85 whatever the library default is."""

    import captum_prxai
    from captum_prxai.bench.ablation import VARIANTS

    for name, kwargs in VARIANTS.items():
        edge, graph, teleport, damping = name.split(":")[1:5]
        assert kwargs["graph"] == graph and kwargs["teleport"] == teleport
        assert kwargs["damping"] == float(damping)
        captum_prxai.PageRankAttribution(lambda *a: None, [captum_prxai.hooks.nn.Linear(1, 1)], **kwargs)


def test_speed_ratios_are_relative_to_forward_backward_within_a_cell():
    from captum_prxai.bench.speed import SpeedRow, SpeedSettings, _set_ratios, speed_table

    rows = [SpeedRow("m", 128, 1, "forward+backward", 2.0, 4.0), SpeedRow("m", 128, 1, "pr-ag", 1.0, 8.0),
            SpeedRow("m", 512, 1, "pr-ag", 3.0, None, "skipped")]
    _set_ratios(rows, 128, 1, "median_s")
    assert [r.ratio for r in rows] == [1.0, 0.5, None]
    _set_ratios(rows, 128, 1, "peak_mib")
    assert [r.ratio for r in rows][:2] == [1.0, 2.0]
    table = speed_table(rows, SpeedSettings(), "captum-prxai bench-speed")
    assert "| m | 128 | 1 | pr-ag | 1.000 | 2.00× | 8 |  |" in table and "skipped" in table


def test_write_bin_breakdown_pairs_the_default_with_each_rival_per_bin(tmp_path):
    from captum_prxai.bench.report import write_bin_breakdown

    run = tmp_path / "run"
    run.mkdir()
    # default pr-tag against ig: comprehensiveness@1 differences +0.1, +0.3 (mean +0.2, ahead); @50 differences
    # -0.2, -0.4 (mean -0.3, s.e. 0.1: a loss, in bold); sufficiency equal everywhere
    rows = [(0, "pr-tag", 0.5, 0.4), (0, "ig", 0.4, 0.6), (1, "pr-tag", 0.6, 0.2), (1, "ig", 0.3, 0.6),
            (0, "random", 0.0, 0.0), (1, "random", 0.0, 0.0)]
    (run / "results.csv").write_text("example,method,comprehensiveness@1,comprehensiveness@50,sufficiency@1,"
                                     "sufficiency@50\n" + "".join(f"{e},{m},{c1},{c50},0.1,0.2\n"
                                                                  for e, m, c1, c50 in rows))
    path = write_bin_breakdown([("toy", run, "pr-tag"), ("not run", tmp_path / "none", "pr-tag")],
                               tmp_path / "bins.md", rivals=("ig", "attnlrp"), bins=("1", "50"))
    lines = [line for line in path.read_text().splitlines() if line.startswith("| toy")]
    assert lines == ["| toy | Integrated Gradients | 2 | +0.200 ± 0.100 | **−0.300 ± 0.100** | +0.000 ± 0.000 | "
                     "+0.000 ± 0.000 |"]  # no AttnLRP rows in the run, and the run without results is left out


def test_write_matrix_ranks_methods_per_run_and_overall(tmp_path):
    from captum_prxai.bench.report import write_matrix

    def run(folder, comp):
        folder.mkdir()
        stat = lambda v: {"mean": v, "sem": 0.01, "n": 10}  # noqa: E731
        methods = {m: {"comprehensiveness": stat(c), "sufficiency": stat(0.1), "aopc_most": stat(0.2),
                       "time_s": stat(0.5)} for m, c in comp.items()}
        meta = {"model": "toy", "n_examples": 10, "max_length": 64, "model_accuracy": 0.9}
        (folder / "summary.json").write_text(json.dumps({"meta": meta, "methods": methods}))
        return folder

    a = run(tmp_path / "a", {"pr-g": 0.4, "gae": 0.3, "random": 0.5})
    b = run(tmp_path / "b", {"pr-g": 0.2, "gae": 0.3, "random": 0.1})
    # per-example values of run A: differences pr-g - gae are 0.1, 0.2, 0.3 (example 3 has no gae row)
    rows = [(0, "pr-g", 0.5), (0, "gae", 0.4), (1, "pr-g", 0.6), (1, "gae", 0.4), (2, "pr-g", 0.7), (2, "gae", 0.4),
            (3, "pr-g", 0.9)]
    # sufficiency per example: pr-g - gae differences are -0.1, -0.1, -0.1
    (a / "results.csv").write_text("example,method,comprehensiveness,sufficiency\n" +
                                   "".join(f"{e},{m},{v},{0.3 - v / 5 if m == 'pr-g' else 0.4 - v / 4}\n"
                                           for e, m, v in rows))
    text = write_matrix([("A", a), ("B", b), ("missing", tmp_path / "none")], tmp_path / "m.md",
                        pairs=[("pr-g", "gae"), ("pr-ag", "gae")]).read_text()
    paired = text.split("## Paired differences in comprehensiveness (a − b, same examples; > 0: a is better)")[1]
    paired = paired.split("## Paired differences in sufficiency")[0]
    assert "| PR-G − GAE | 0.200 ± 0.058 |  |" in paired and "PR-AG" not in paired  # s.e. = 0.1 / sqrt(3)
    paired_suff = text.split("## Paired differences in sufficiency (a − b, same examples; < 0: a is better)")[1]
    # pr-g suff 0.3 - c/5 = 0.2, 0.18, 0.16 against gae's 0.4 - 0.4/4 = 0.3: differences -0.1, -0.12, -0.14
    assert "| PR-G − GAE | -0.120 ± 0.012 |  |" in paired_suff.split("## A")[0]
    assert "## missing" not in text and text.count("Model `toy`, 10 examples") == 2
    section_a = text.split("## A")[1].split("## B")[0]
    # sorted by comprehensiveness; the random control is listed but not ranked
    assert section_a.index("Random") < section_a.index("PR-G") < section_a.index("GAE")
    assert "| Random | 0.500 ± 0.010 | 0.100 ± 0.010 | 0.200 ± 0.010 | 0.500 | – |" in section_a
    assert "| PR-G | 0.400 ± 0.010" in section_a and section_a.split("| PR-G |")[1].split("\n")[0].endswith("| 1 |")
    overview = text.split("## Comprehensiveness ↑ in every run (best in bold)")[1].split("## A")[0]
    assert "| GAE | 0.300 ± 0.010 | **0.300 ± 0.010** | 1.50 | 2 |" in overview
    assert "| PR-G | **0.400 ± 0.010** | 0.200 ± 0.010 | 1.50 | 2 |" in overview
    assert "| Random | 0.500 ± 0.010 | 0.100 ± 0.010 | – | 0 |" in overview  # the control: never bold, not ranked


def test_precomputed_scores_become_a_method(tmp_path):
    from captum_prxai.bench import METHODS, build_method, register_precomputed

    path = tmp_path / "scores.jsonl"
    path.write_text(json.dumps({"input_ids": [101, 7, 8, 102], "scores": [0.0, 0.5, -1.0, 0.0]}) + "\n\n")
    try:
        register_precomputed("ext-toy", path, label="External")
        explainer = build_method("ext-toy", None, None, None)
        ids = torch.tensor([[101, 7, 8, 102, 0]])
        mask = torch.tensor([[1, 1, 1, 1, 0]])
        scores = explainer(ids, mask, torch.zeros_like(ids), torch.tensor([1]))
        assert scores.tolist() == [[0.0, 0.5, -1.0, 0.0, 0.0]] and explainer.label == "External"
        with pytest.raises(PRXAIError, match="has no scores for this input"):
            explainer(torch.tensor([[101, 9, 102]]), torch.ones(1, 3, dtype=torch.long), None, torch.tensor([0]))
    finally:
        METHODS.pop("ext-toy", None)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"input_ids": [1, 2], "scores": [0.1]}) + "\n")
    with pytest.raises(PRXAIError, match="2 input_ids but 1 scores"):
        register_precomputed("ext-bad", bad)
    with pytest.raises(PRXAIError, match="no precomputed scores"):
        register_precomputed("ext-none", tmp_path / "none.jsonl")


def _metric_rows(path):
    """A results.csv's rows without the columns that differ between two runs of the same work (time, memory)."""
    with path.open() as fh:
        return [{k: v for k, v in r.items() if k not in ("time_s", "peak_mem_mb")} for r in csv.DictReader(fh)]


def test_merge_adds_a_method_to_a_finished_run_without_its_cache_and_keeps_the_other_rows(tiny, tmp_path):
    model, tokenizer = tiny
    out = tmp_path / "out"
    run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=3, out_dir=out, progress=False)
    before = (out / "results.csv").read_text()
    first = json.loads((out / "summary.json").read_text())["methods"]
    (out / "cache.jsonl").unlink()  # the caches are not committed: the kept rows must come from the CSV
    added = run_benchmark(model, tokenizer, DATA, ["gae"], n=3, out_dir=out, progress=False, merge=True)
    assert added.n_computed == 3 and added.n_cached == 0
    with (out / "results.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["method"] for r in rows[:3]] == ["pr-ag", "random", "gae"]
    kept = [line for line in (out / "results.csv").read_text().splitlines()[1:] if ",gae," not in line]
    assert kept == before.splitlines()[1:]  # the kept rows are written back unchanged
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["methods"]) == ["pr-ag", "random", "gae"]
    assert summary["methods"]["pr-ag"] == first["pr-ag"] and summary["methods"]["random"] == first["random"]
    assert set(summary["meta"]["cache_keys"]) == {"pr-ag", "random", "gae"}
    assert _table_labels((out / "summary.md").read_text()) == [METHODS[m].label for m in ("pr-ag", "random", "gae")]
    assert (out / "deletion_curves-added.png").stat().st_size > 0
    # the same method again replaces its rows rather than doubling them
    run_benchmark(model, tokenizer, DATA, ["gae"], n=3, out_dir=out, progress=False, merge=True)
    with (out / "results.csv").open() as fh:
        assert sum(r["method"] == "gae" for r in csv.DictReader(fh)) == 3
    with pytest.raises(PRXAIError, match=r"^merge=True needs the same examples as the run in .*: its 'pr-ag' rows "
                                         r"cover 3 examples, this run 2 \(pass the n of that run\)\.$"):
        run_benchmark(model, tokenizer, DATA, ["ixg"], n=2, out_dir=out, progress=False, merge=True)
    # another model's rows are never paired with the kept ones, and nothing is written
    torch.manual_seed(1)
    other = type(model)(model.config).eval()
    kept = (out / "results.csv").read_text()
    with pytest.raises(PRXAIError, match=r"^merge=True: on example \d+ the model gives .* not the same model"):
        run_benchmark(other, tokenizer, DATA, ["ixg"], n=3, out_dir=out, progress=False, merge=True)
    assert (out / "results.csv").read_text() == kept
    with pytest.raises(PRXAIError, match="does not exist; run the benchmark without merge first"):
        run_benchmark(model, tokenizer, DATA, ["ixg"], n=2, out_dir=tmp_path / "none", progress=False, merge=True)


def test_reuse_results_extends_a_run_from_its_csv_computing_only_the_new_examples(tiny, tmp_path):
    model, tokenizer = tiny
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=2, out_dir=out, progress=False)
    (out / "cache.jsonl").unlink()  # a committed run: its results.csv and summary.json, no cache
    (out / "deletion_curves.png").write_bytes(b"drawn for n=2")
    grown = run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=4, out_dir=out, progress=False,
                          reuse_results=True)
    assert grown.n_cached == 4 and grown.n_computed == 4  # 2 examples x 2 methods taken, the 2 new ones computed
    whole = run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=4, out_dir=fresh, progress=False)

    assert whole.n_computed == 8 and _metric_rows(out / "results.csv") == _metric_rows(fresh / "results.csv")
    # no curves for the reused rows: the old plot is left, not redrawn from half the examples, and the reports say
    # which examples it averages
    assert (out / "deletion_curves.png").read_bytes() == b"drawn for n=2"
    assert json.loads((out / "summary.json").read_text())["meta"]["plot_examples"] == 2
    assert ("`deletion_curves.png` averages the first 2 of these 4 examples in sample order: rows taken from "
            "`results.csv` keep no curves, so it was not redrawn.") in (out / "summary.md").read_text()
    assert json.loads((fresh / "summary.json").read_text())["meta"]["plot_examples"] == 4
    assert "deletion_curves.png" not in (fresh / "summary.md").read_text()
    # a run from before the count was kept: the report says the plot is of an earlier run, not how many
    summary = json.loads((out / "summary.json").read_text())
    del summary["meta"]["plot_examples"]
    (out / "summary.json").write_text(json.dumps(summary))
    (out / "cache.jsonl").unlink()
    run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=5, out_dir=out, progress=False, reuse_results=True)
    assert json.loads((out / "summary.json").read_text())["meta"]["plot_examples"] is None
    assert ("`deletion_curves.png` was not redrawn: it averages the examples of an earlier run of this sample, whose "
            "size was not recorded") in (out / "summary.md").read_text()
    # another model's key differs: nothing is reused, everything is computed again
    torch.manual_seed(1)
    other = type(model)(model.config).eval()
    (out / "cache.jsonl").unlink()
    with pytest.warns(UserWarning, match=r"^reuse_results=True: the rows of pr-ag, random in .*results\.csv were made "
                                         r"under another cache key .* computed again on every example not in "
                                         r"this run's cache\.$"):
        again = run_benchmark(other, tokenizer, DATA, ["pr-ag", "random"], n=4, out_dir=out, progress=False,
                              reuse_results=True)
    assert again.n_cached == 0 and again.n_computed == 8
    with pytest.raises(PRXAIError, match=r"^merge=True adds methods on the same examples and reuse_results=True "
                                         r"extends a run to more examples: use one at a time\.$"):
        run_benchmark(model, tokenizer, DATA, ["gae"], n=4, out_dir=out, progress=False, merge=True,
                      reuse_results=True)


def test_reuse_results_checks_each_reused_example_against_the_current_text_and_model(tiny, tmp_path):
    """The cache key names the dataset only by name and split: a dataset whose content changed under the same name
    must not hand its old rows to other texts. Two same-label texts trade places; their rows are computed again."""
    model, tokenizer = tiny
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=4, out_dir=out, progress=False)
    (out / "cache.jsonl").unlink()
    swapped = list(DATA)
    swapped[1], swapped[4] = DATA[4], DATA[1]  # both label 0: the label cannot tell them apart
    picked = set(select_examples(len(DATA), 4))
    assert {1, 4} <= picked  # both are in the sample, so without the check their rows would be reused
    with pytest.warns(UserWarning, match=r"^reuse_results=True: the rows of 2 of 4 examples in .*results\.csv do not "
                                         r"match this run \(example 1: the model gives target \d, 6 tokens .*"
                                         r"have \d, 5 and .*Those examples are computed again"):
        grown = run_benchmark(model, tokenizer, swapped, ["pr-ag", "random"], n=4, out_dir=out, progress=False,
                              reuse_results=True)
    assert grown.n_cached == 4 and grown.n_computed == 4  # examples 1 and 4 computed again, 2 and 3 reused
    run_benchmark(model, tokenizer, swapped, ["pr-ag", "random"], n=4, out_dir=fresh, progress=False)

    assert _metric_rows(out / "results.csv") == _metric_rows(fresh / "results.csv")


def test_finished_only_summarises_the_finished_prefix_of_a_stopped_run_and_computes_nothing(tiny, tmp_path):
    model, tokenizer = tiny
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=3, out_dir=out, progress=False)
    # a run to n=5 stopped after one more record: the fourth example of the sample order has pr-ag, not random
    cache = (out / "cache.jsonl").read_text().splitlines()
    run_benchmark(model, tokenizer, DATA, ["pr-ag"], n=4, out_dir=out, progress=False)
    assert len((out / "cache.jsonl").read_text().splitlines()) == len(cache) + 1
    done = run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=5, out_dir=out, progress=False,
                         finished_only=True)
    assert done.n_computed == 0 and done.n_cached == 6 and done.meta["n_examples"] == 3
    run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=3, out_dir=fresh, progress=False)

    assert _metric_rows(out / "results.csv") == _metric_rows(fresh / "results.csv")
    with pytest.raises(PRXAIError, match=r"^finished_only=True: .* has no example with a record of every method "
                                         r"\(pr-ag, gae\) for these settings; nothing to summarise\.$"):
        run_benchmark(model, tokenizer, DATA, ["pr-ag", "gae"], n=5, out_dir=out, progress=False, finished_only=True)
    with pytest.raises(PRXAIError, match=r"^finished_only=True summarises what a run's cache .* cannot merge\.$"):
        run_benchmark(model, tokenizer, DATA, ["gae"], n=3, out_dir=out, progress=False, finished_only=True,
                      merge=True)


def test_write_command_appends_after_a_merge(tmp_path):
    from captum_prxai.bench.runner import write_command

    write_command(tmp_path, "python benchmarks/matrix.py", ["--cell", "c"])
    path = write_command(tmp_path, "python benchmarks/matrix.py", ["--cell", "c", "--add", "gae"], append=True)
    assert path.read_text() == "python benchmarks/matrix.py --cell c\npython benchmarks/matrix.py --cell c --add gae\n"


def test_write_command_quotes_arguments(tmp_path):
    from captum_prxai.bench.runner import write_command

    path = write_command(tmp_path, "python benchmarks/matrix.py", ["--cell", "a b", "--n", "3"])
    assert path.read_text() == "python benchmarks/matrix.py --cell 'a b' --n 3\n"


# ------------------------------------------------------------------- decoders: the explained token is kept
def test_decoder_benchmark_never_removes_the_explained_last_token(tiny_decoder, tiny, tmp_path):
    from captum_prxai.capture import model_is_causal

    model, tokenizer = tiny_decoder
    assert model_is_causal(model) and not model_is_causal(tiny[0])
    last_ids = {tokenizer(text)["input_ids"][-1] for text, _ in DATA}
    seen = []

    def forward(ids, mask):
        seen.append((ids.clone(), mask.clone()))
        return model(ids, attention_mask=mask).logits

    data = [(t, y) for t, y in DATA if len(t.split()) > 1]
    result = run_benchmark(model, tokenizer, data, ["pr-tag", "random"], n=3, out_dir=tmp_path / "on",
                           forward_func=forward, progress=False, plot=False)
    assert result.errors == [] and result.meta["protect_explained"] is True
    assert "The explained (last) token is never removed" in result.files["markdown"].read_text()
    rows = [(i, m) for batch_ids, batch_mask in seen for i, m in zip(batch_ids, batch_mask)]
    assert rows
    for ids, mask in rows:  # every forward (full or perturbed) ends with one of the texts' last tokens
        real = ids[mask.bool()]
        assert int(real[-1]) in last_ids

    seen.clear()
    off = run_benchmark(model, tokenizer, data, ["pr-tag", "random"], n=3, out_dir=tmp_path / "on",
                        forward_func=forward, progress=False, plot=False, protect_explained=False)
    assert off.n_computed == 6 and off.n_cached == 0  # another cache key: nothing reused
    assert off.meta["protect_explained"] is False
    assert any(int(i[m.bool()][-1]) not in last_ids for batch_ids, batch_mask in seen
               for i, m in zip(batch_ids, batch_mask) if m.any())
    with pytest.raises(PRXAIError, match="protect_explained must be True, False or None"):
        run_benchmark(model, tokenizer, data, ["random"], n=1, out_dir=tmp_path / "bad", progress=False,
                      protect_explained="yes")


def _paired_csv(path, rows):
    """``results.csv`` with (example, method, comprehensiveness, sufficiency) rows."""
    path.write_text("example,method,comprehensiveness,sufficiency\n"
                    + "".join(f"{e},{m},{c},{s}\n" for e, m, c, s in rows))
    return path


def test_default_check_pairs_the_default_with_every_method_and_finds_its_worst_case(tmp_path):
    from captum_prxai.bench.report import default_check

    rows = []
    for e in range(4):
        rows += [(e, "pr-tag", 0.5, 0.1),
                 (e, "gae", 0.4 + 0.01 * e, 0.2),                # behind the default on both metrics
                 (e, "ig", 0.5 + (0.02 if e % 2 else -0.02), 0.1 + 0.03 * e),  # level on comp, ahead on suff
                 (e, "lime", 0.6 + 0.01 * e, 0.05),              # ahead of the default on both
                 (e, "random", 0.9, -1.0)]                       # the control: never the worst case
    check = default_check(_paired_csv(tmp_path / "r.csv", rows), "pr-tag", rivals=("gae", "ig", "attnlrp"))
    assert check["n"] == 4 and check["default"]["comprehensiveness"]["mean"] == pytest.approx(0.5)
    assert check["others"]["gae"]["comprehensiveness"]["mean"] == pytest.approx(0.085)
    assert check["others"]["ig"]["sufficiency"]["mean"] == pytest.approx(-0.045)
    # the goal: not behind by more than one paired s.e. on either metric; a rival not in the run is left out
    assert check["goal"] == {"gae": True, "ig": True}
    method, metric, loss = check["worst"]
    assert (method, metric) == ("lime", "comprehensiveness") and loss["mean"] == pytest.approx(0.115)
    with pytest.raises(KeyError, match="no rows for the default 'pr-tag-pm'"):
        default_check(tmp_path / "r.csv", "pr-tag-pm")


def test_default_check_goal_fails_when_behind_by_more_than_one_standard_error(tmp_path):
    from captum_prxai.bench.report import default_check

    # sufficiency of the default worse than GAE's by 0.02 on every example but one: behind by far more than a s.e.
    rows = [(e, m, 0.5, 0.3 if m == "pr-tag" and e else 0.28) for e in range(5) for m in ("pr-tag", "gae")]
    check = default_check(_paired_csv(tmp_path / "r.csv", rows), "pr-tag", rivals=("gae",))
    assert check["goal"] == {"gae": False}
    assert check["worst"][:2] == ("gae", "sufficiency") and check["worst"][2]["mean"] == pytest.approx(0.016)


def test_write_default_check_tables_each_run_and_lists_runs_without_the_default(tmp_path):
    from captum_prxai.bench.report import write_default_check

    a = tmp_path / "a"
    a.mkdir()
    _paired_csv(a / "results.csv", [(e, m, c + 0.01 * e, s) for e in range(3)
                                    for m, c, s in (("pr-tag", 0.5, 0.1), ("gae", 0.4, 0.2), ("ig", 0.6, -0.1))])
    b = tmp_path / "b"
    b.mkdir()
    _paired_csv(b / "results.csv", [(0, "pr-g", 0.5, 0.1)])  # a former run, without the default
    d = tmp_path / "d"  # a run without LIG: the goal is judged on GAE alone, and says so
    d.mkdir()
    _paired_csv(d / "results.csv", [(e, m, c + 0.01 * e, 0.1) for e in range(3) for m, c in (("pr-tag", 0.5),
                                                                                            ("gae", 0.4))])
    text = write_default_check([("A", a, "pr-tag"), ("B", b, "pr-tag"), ("C", tmp_path / "none", "pr-tag-pm"),
                                ("D", d, "pr-tag")], tmp_path / "d.md", columns=("gae", "ig", "attnlrp")).read_text()
    row_d = next(line for line in text.splitlines() if line.startswith("| D |"))
    assert "| met (Integrated Gradients not run) |" in row_d
    row = next(line for line in text.splitlines() if line.startswith("| A |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:4] == ["A", "PR-TAG", "3", "0.510 / 0.100"]
    assert cells[4] == "+0.100 ± 0.000 / −0.100 ± 0.000 (ahead / ahead)"
    assert cells[5] == "−0.100 ± 0.000 / +0.200 ± 0.000 (behind / behind)" and cells[6] == ""
    assert cells[7] == "not met: Integrated Gradients"
    assert cells[8] == "+0.200 ± 0.000 sufficiency to Integrated Gradients"
    assert "Not run with the default yet: B (`pr-tag`); C (`pr-tag-pm`)." in text


def test_memory_child_imports_this_package_not_the_current_folders(tmp_path, monkeypatch):
    """A shadowing ``captum_prxai`` in the working folder must not be the package that is measured."""
    from captum_prxai.bench.speed import peak_in_subprocess

    shadow = tmp_path / "captum_prxai"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('the shadow copy was imported')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    peak, why = peak_in_subprocess("forward", 8, 1)
    assert why == "" and peak is not None and peak >= 0
    peak, why = peak_in_subprocess("no-such-method", 8, 1)
    assert peak is None and why.startswith("failed: ") and "no-such-method" in why


def test_reuse_retrained_takes_a_nearly_equal_models_rows_after_a_spot_check(tiny, tmp_path):
    """A model retrained with the same recipe but not bit-for-bit equal: its cache key differs, so plain reuse takes
    nothing. reuse_retrained recomputes the first stored examples, compares, then takes the other stored rows."""
    import copy

    from captum_prxai.bench import runner as runner_module

    model, tokenizer = tiny
    out = tmp_path / "out"
    run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=4, out_dir=out, progress=False)
    (out / "cache.jsonl").unlink()
    def by_id():
        return {(int(r["example"]), r["method"]): r for r in _metric_rows(out / "results.csv")}

    before = by_id()
    near = copy.deepcopy(model)
    with torch.no_grad():
        for p in list(near.parameters())[-2:]:  # the classifier: logits x 4, the same argmax, probabilities apart
            p.mul_(4.0)
    with pytest.raises(PRXAIError, match=r"^reuse_retrained=True takes the rows of a retrained model from "
                                         r"results\.csv: it needs reuse_results=True\.$"):
        run_benchmark(near, tokenizer, DATA, ["pr-ag", "random"], n=5, out_dir=out, progress=False,
                      reuse_retrained=True)

    with pytest.raises(PRXAIError, match=r"^finished_only=True computes nothing, but reuse_retrained=True first "
                                         r"checks examples \[\d+, \d+\] with this model and the cache does not have "
                                         r"them all: run once without finished_only\.$"):
        run_benchmark(near, tokenizer, DATA, ["pr-ag", "random"], n=5, out_dir=out, progress=False,
                      reuse_results=True, reuse_retrained=True, finished_only=True)
    grown = run_benchmark(near, tokenizer, DATA, ["pr-ag", "random"], n=5, out_dir=out, progress=False,
                          reuse_results=True, reuse_retrained=True)
    order = runner_module._sample_order(len(DATA), 5)
    spot, taken, new = order[:2], order[2:4], order[4]
    # the 2 spot-check examples and the new one computed (x 2 methods), the other 2 stored examples taken
    assert grown.n_computed == 6 and grown.n_cached == 4
    after = by_id()
    for key, value in before.items():  # taken rows are the former model's, exactly
        if key[0] in taken:
            assert after[key] == value
    for key, value in before.items():  # the spot-checked ones were computed again, and agree within the tolerance
        if key[0] in spot:
            assert abs(float(after[key]["comprehensiveness"]) - float(value["comprehensiveness"])) <= 1e-2
    assert {k[0] for k in after} == set(order)
    [note] = json.loads((out / "summary.json").read_text())["meta"]["reused_retrained"]
    assert note["examples"] == 2 and note["spot_check"] == sorted(spot) and note["tolerance"] == 1e-2
    assert note["example_ids"] == sorted(taken) and note["methods"] == ["pr-ag", "random"] and note["every_method"]
    assert 0 <= note["max_metric_difference"] <= 1e-2 and 0 <= note["max_prob_difference"] <= 1e-2
    assert "The rows of 2 of these examples were made by a former model" in (out / "summary.md").read_text()
    assert note["max_prob_difference"] > 1e-4  # beyond the same-model check: a plain extension would not keep them
    # resuming the extended run (its summary now holds this model's keys over the former model's rows) takes them
    # again with reuse_retrained; without it, their probabilities fail the same-model check and they are recomputed
    (out / "cache.jsonl").unlink()
    again = run_benchmark(near, tokenizer, DATA, ["pr-ag", "random"], n=5, out_dir=out, progress=False,
                          reuse_results=True, reuse_retrained=True)
    assert again.n_computed == 0 and again.n_cached == 10
    assert by_id() == after
    # nothing was under another key this time, but the taken examples' rows are still the former model's: the
    # note is carried, and the report still says so
    assert json.loads((out / "summary.json").read_text())["meta"]["reused_retrained"] == [note]
    assert "The rows of 2 of these examples were made by a former model" in (out / "summary.md").read_text()
    (out / "cache.jsonl").unlink(missing_ok=True)
    with pytest.warns(UserWarning, match=r"^reuse_results=True: the rows of \d of 5 examples .* do not match"):
        plain = run_benchmark(near, tokenizer, DATA, ["pr-ag", "random"], n=5, out_dir=out, progress=False,
                              reuse_results=True)
    assert plain.n_computed > 0

    # a model that is not the same recipe: the spot check fails, nothing is written, its records stay in the cache
    torch.manual_seed(1)
    other = type(model)(model.config).eval()
    (out / "cache.jsonl").unlink(missing_ok=True)
    kept = (out / "results.csv").read_text()
    with pytest.raises(PRXAIError, match=r"^reuse_retrained=True: on example \d+ the model gives target \d, \d+ "
                                         r"tokens and probability .* but the stored rows have .* more than 0\.01 "
                                         r"apart: the stored rows are not reused\."):
        run_benchmark(other, tokenizer, DATA, ["pr-ag", "random"], n=6, out_dir=out, progress=False,
                      reuse_results=True, reuse_retrained=True)
    assert (out / "results.csv").read_text() == kept
    assert (out / "cache.jsonl").read_text().count("\n") >= 1


def test_recompute_retrained_replaces_a_former_models_rows_with_this_models(tiny, tmp_path):
    """recompute_retrained computes again, every method, the examples whose rows a note says a former model made,
    even where their probabilities pass the same-model check, and takes the rest from results.csv: the rows then
    equal a run made with this model alone, and no note of a former model is left."""
    from captum_prxai.bench import runner as runner_module

    model, tokenizer = tiny
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=5, out_dir=fresh, progress=False)
    run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=5, out_dir=out, progress=False)
    (out / "cache.jsonl").unlink()
    order = runner_module._sample_order(len(DATA), 5)
    former = sorted(order[2:4])
    # a former model's rows: the same probabilities (they pass the 1e-4 check), other metrics
    with (out / "results.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if int(r["example"]) in former:
            r["comprehensiveness"] = r["sufficiency"] = "0.987"
    with (out / "results.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    summary = json.loads((out / "summary.json").read_text())
    summary["meta"]["reused_retrained"] = [{"examples": 2, "example_ids": former, "spot_check": sorted(order[:2]),
                                            "methods": ["pr-ag", "random"], "every_method": True,
                                            "max_metric_difference": 0.003, "max_prob_difference": 0.0004,
                                            "tolerance": 0.01}]
    (out / "summary.json").write_text(json.dumps(summary))
    for bad in ({"reuse_retrained": True, "reuse_results": True}, {}):
        with pytest.raises(PRXAIError, match=r"^recompute_retrained=True computes again the rows that an earlier "
                                             r"reuse_retrained run took from a former model: it needs "
                                             r"reuse_results=True, and cannot be combined with reuse_retrained=True, "
                                             r"which keeps them\.$"):
            run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=5, out_dir=out, progress=False,
                          recompute_retrained=True, **bad)
    again = run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=5, out_dir=out, progress=False,
                          reuse_results=True, recompute_retrained=True)
    assert again.n_computed == 4 and again.n_cached == 6
    assert {r["example"] for r in again.records if "curve_most" in r} == set(former)
    assert "reused_retrained" not in json.loads((out / "summary.json").read_text())["meta"]
    assert "former model" not in (out / "summary.md").read_text()

    def metrics(folder):
        return {(int(r["example"]), r["method"]): (r["comprehensiveness"], r["sufficiency"], r["prob"])
                for r in _metric_rows(folder / "results.csv")}

    assert metrics(out) == metrics(fresh)
    # a note of one method's changed key names that method's rows alone; a note without its examples is refused
    assert runner_module._retrained_pairs([{"example_ids": [3], "methods": ["random"], "every_method": False}],
                                          ["pr-ag", "random"]) == {("random", 3)}
    # a former model's note: every method but one this model made on all of its examples (on some: not known where)
    note = {"example_ids": [3, 5], "methods": ["random"], "every_method": False, "this_model": {"pr-ag": 2, "gae": 1}}
    assert runner_module._retrained_pairs([note], ["pr-ag", "random", "gae", "ig"]) == {
        (m, e) for m in ("random", "gae", "ig") for e in (3, 5)}
    with pytest.raises(PRXAIError, match=r"^recompute_retrained=True: a note in summary\.json \(reused_retrained\) "
                                         r"was written before the examples it took were kept"):
        runner_module._retrained_pairs([{"examples": 2}], ["pr-ag"])


def test_reuse_retrained_notes_name_the_methods_and_carry_the_earlier_runs(tiny, tmp_path):
    """A run where one method's key changed alone (its options or inputs) says so, naming the method, not "a former
    model"; an earlier run's note stays, counting only the examples whose rows are still taken from results.csv."""
    from captum_prxai.bench import runner as runner_module

    model, tokenizer = tiny
    out = tmp_path / "out"
    run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=4, out_dir=out, progress=False)
    (out / "cache.jsonl").unlink()
    order = runner_module._sample_order(len(DATA), 5)
    summary = json.loads((out / "summary.json").read_text())
    summary["meta"]["cache_keys"]["random"] = "an-older-key"
    earlier = {"examples": 2, "example_ids": sorted(order[2:4]), "spot_check": sorted(order[:2]),
               "max_metric_difference": 0.003, "max_prob_difference": 0.0004, "tolerance": 0.01}
    summary["meta"]["reused_retrained"] = earlier  # one note as a dict, as the first runs wrote it
    (out / "summary.json").write_text(json.dumps(summary))

    grown = run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=5, out_dir=out, progress=False,
                          reuse_results=True, reuse_retrained=True)
    assert grown.n_computed == 4  # random on the two spot-check examples, both methods on the new one
    first, this = json.loads((out / "summary.json").read_text())["meta"]["reused_retrained"]
    assert first == earlier
    assert this["methods"] == ["random"] and this["example_ids"] == sorted(order[2:4]) and this["examples"] == 2
    assert this["every_method"] is False
    assert this["max_metric_difference"] == 0.0  # the random scores are seeded per example: computed again, equal
    md = (out / "summary.md").read_text()
    assert "The rows of 2 of these examples were made by a former model" in md
    assert ("The rows of Random on 2 of these examples were stored under another cache key of that method alone"
            in md)

    # a later plain extension that computes one of the earlier note's examples again counts only the other
    (out / "cache.jsonl").unlink()
    with (out / "results.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if int(r["example"]) != order[2]]
    with (out / "results.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    run_benchmark(model, tokenizer, DATA, ["pr-ag", "random"], n=5, out_dir=out, progress=False, reuse_results=True)
    notes = json.loads((out / "summary.json").read_text())["meta"]["reused_retrained"]
    assert [n["example_ids"] for n in notes] == [[order[3]], [order[3]]]
    assert [n["examples"] for n in notes] == [1, 1]


def test_retrained_note_keeps_its_kind_when_a_method_is_added_later():
    """A note says "a former model" when every method's key had changed in its run, whatever methods the cell has
    since (a method added with merge); one written for a single method keeps naming it."""
    from captum_prxai.bench.report import _retrained_note

    base = {"examples": 3, "example_ids": [1, 2, 3], "spot_check": [0, 4], "max_metric_difference": 0.001,
            "max_prob_difference": 0.0002, "tolerance": 0.01}
    meta = {"cache_keys": {"pr-ag": "a", "random": "b", "gae": "c"},
            "reused_retrained": [{**base, "methods": ["pr-ag", "random"], "every_method": True},
                                 {**base, "methods": ["random"], "every_method": False}]}
    whole, one = [line for line in _retrained_note(meta) if line]
    assert whole.startswith("The rows of 3 of these examples were made by a former model")
    assert one.startswith("The rows of Random on 3 of these examples were stored under another cache key of that "
                          "method alone")


def test_a_method_added_after_a_retrained_extension_is_said_to_span_the_two_models():
    """A former model's rows of every method, carried into a run with a method they do not have (computed with this
    model on those examples too): the note names the added method, whose pairs there span the two models."""
    from captum_prxai.bench import runner as runner_module
    from captum_prxai.bench.report import _retrained_note

    note = {"examples": 3, "example_ids": [1, 2, 3], "spot_check": [0, 4], "max_metric_difference": 0.001,
            "max_prob_difference": 0.0002, "tolerance": 0.01, "methods": ["pr-ag", "random"], "every_method": True}
    names = ["pr-ag", "random", "gae"]
    [same] = runner_module._carried_retrained([note], {1, 2}, names[:2], {5: {"pr-ag", "random"}})
    assert same["every_method"] and "this_model" not in same and same["example_ids"] == [1, 2]
    # GAE's rows on all three examples and Random's on one were made by this model (they have curves)
    made_here = {1: {"gae"}, 2: {"gae", "random"}, 3: {"gae"}, 5: set(names)}
    [grown] = runner_module._carried_retrained([note], {1, 2, 3}, names, made_here)
    assert grown["every_method"] is False and grown["this_model"] == {"random": 1, "gae": 3}
    assert grown["methods"] == ["pr-ag"]
    # a note written before notes named their methods: the former model's are the others
    older = {k: v for k, v in note.items() if k not in ("methods", "every_method")}
    [old] = runner_module._carried_retrained([older], {1, 2, 3}, names, {1: {"gae"}})
    assert old["methods"] == ["pr-ag", "random"] and old["this_model"] == {"gae": 1}
    # carried once more, the note is derived again from the rows as they are
    [again] = runner_module._carried_retrained([grown], {1, 2, 3}, names, {1: {"gae"}})
    assert again["this_model"] == {"gae": 1} and again["methods"] == ["pr-ag", "random"]
    [whole] = runner_module._carried_retrained([grown], {1, 2, 3}, names, {})
    assert whole["every_method"] and "this_model" not in whole and whole["methods"] == names
    [line] = [text for text in _retrained_note({"reused_retrained": [grown]}) if text]
    assert line.startswith("The rows of PR-AG on 3 of these examples were made by a former model")
    assert line.endswith("The rows of Random on 1 of them and GAE on all of them were made by this model: there "
                         "their paired differences with the former model's rows span the two models.")


def test_retrained_spot_check_refuses_metrics_that_moved_and_methods_it_could_not_check(tmp_path):
    from captum_prxai.bench import runner as runner_module

    def row(example, method, comp, prob=0.9):
        return {"example": example, "method": method, "label": 1, "target": 1, "prob": prob, "n_tokens": 5,
                "metrics": {"comprehensiveness": comp, "sufficiency": 0.1}}

    data = runner_module._Data(texts=["a", "b", "c"], labels=[1, 1, 1], label_names=["neg", "pos"], name="d",
                               split="test")
    keys = {"pr-ag": "k1", "random": "k2"}
    stale = {("pr-ag", 0): row(0, "pr-ag", 0.50), ("pr-ag", 1): row(1, "pr-ag", 0.4),
             ("random", 0): row(0, "random", 0.2), ("random", 1): row(1, "random", 0.3)}
    probe = lambda index: (1, 5, 0.9004)  # noqa: E731 - every stored example agrees to 4e-4 in probability
    # pr-ag's comprehensiveness moved by 0.02 on the spot-check example: refused, with where
    with pytest.raises(PRXAIError, match=r"^reuse_retrained=True: on example 0, pr-ag's comprehensiveness is 0\.5200 "
                                         r"with this model and 0\.5000 in .*results\.csv, more than 0\.01 apart"):
        runner_module._retrained_rows(stale, [row(0, "pr-ag", 0.52), row(0, "random", 0.2)], keys, data, probe,
                                      tmp_path)
    # random has no record on the spot-check example (it failed there): its rows cannot be checked
    with pytest.raises(PRXAIError, match=r"^reuse_retrained=True: random has no record on the spot-check examples "
                                         r"\[0\], so its stored rows cannot be checked and are not reused\.$"):
        runner_module._retrained_rows(stale, [row(0, "pr-ag", 0.505)], keys, data, probe, tmp_path)
    # a method of this run with no stored row on a taken example would mix the two models there: refused
    with pytest.raises(PRXAIError, match=r"^reuse_retrained=True: gae has no row for example 1 in .*results\.csv; "
                                         r"computed now it would come from this model beside the former model's rows "
                                         r"of the same example\. Leave it out of this run's methods\.$"):
        runner_module._retrained_rows(stale, [row(0, "pr-ag", 0.505), row(0, "random", 0.2), row(0, "gae", 0.3)],
                                      {**keys, "gae": "k3"}, data, probe, tmp_path)
    # ... unless that row is in results.csv under this run's key already (a method whose key did not change)
    rows, _ = runner_module._retrained_rows(stale, [row(0, "pr-ag", 0.505), row(0, "random", 0.2), row(0, "gae", 0.3)],
                                            {**keys, "gae": "k3"}, data, probe, tmp_path, covered={("gae", 1)})
    assert sorted((k[1], k[2]) for k in rows) == [(1, "pr-ag"), (1, "random")]
    # within the tolerance: example 1's rows are taken under this run's keys, the spot example's are not
    rows, note = runner_module._retrained_rows(stale, [row(0, "pr-ag", 0.505), row(0, "random", 0.2)], keys, data,
                                               probe, tmp_path)
    assert sorted((k[0], k[1], k[2]) for k in rows) == [("k1", 1, "pr-ag"), ("k2", 1, "random")]
    assert note["examples"] == 1 and note["spot_check"] == [0]
    assert note["max_metric_difference"] == pytest.approx(0.005) and note["max_prob_difference"] == pytest.approx(4e-4)


def test_a_run_records_the_model_card_of_its_model(tiny, tmp_path):
    """A model saved with a card (``captum-prxai train``) has its training date and CPU kernels in the run's
    summary, so a later retrain on another CPU can be told apart; an in-memory model has none."""
    from transformers import BertForSequenceClassification

    model, tokenizer = tiny
    folder = tmp_path / "saved"
    model.save_pretrained(str(folder))
    cpu = {"capability": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
           "processor": "Test CPU, family 1 model 2"}
    (folder / "model_card.json").write_text(json.dumps({"name": "saved", "accuracy": 0.5, "created": "2026-12-06 01:00:00",
                                                        "cpu": cpu, "hyperparameters": {"seed": 0}}))
    saved = BertForSequenceClassification.from_pretrained(str(folder)).eval()
    res = run_benchmark(saved, tokenizer, DATA, ["random"], n=1, out_dir=tmp_path / "a", progress=False, plot=False)
    meta = json.loads((tmp_path / "a" / "summary.json").read_text())["meta"]
    assert meta["model_card"] == {"name": "saved", "accuracy": 0.5, "created": "2026-12-06 01:00:00", "cpu": cpu}
    assert res.meta["model_card"] == meta["model_card"]
    assert ("This run's model was trained 2026-12-06 01:00:00 on Test CPU, family 1 model 2 with AVX2 kernels "
            "(ATEN_CPU_CAPABILITY=avx2, MKL_CBWR=AVX2, ONEDNN_MAX_CPU_ISA=AVX2) (its model card).") in (
        tmp_path / "a" / "summary.md").read_text()

    run_benchmark(model, tokenizer, DATA, ["random"], n=1, out_dir=tmp_path / "b", progress=False, plot=False)
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["meta"]["model_card"] is None
    assert "its model card" not in (tmp_path / "b" / "summary.md").read_text()


