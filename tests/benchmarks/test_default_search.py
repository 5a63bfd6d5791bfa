"""The default search (benchmarks/default_search.py): its rounds' candidates, rules and tables."""

import csv

import pytest
import torch


def _default_search():
    """``benchmarks/default_search.py`` as a module (the benchmarks are scripts, not a package)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        import default_search
    finally:
        sys.path.pop(0)
    return default_search


def test_length_rule_takes_the_two_way_walk_on_short_inputs_only():
    default_search = _default_search()
    values = {metric: {"two": {0: 1.0, 1: 2.0, 2: 3.0}, "one": {0: -1.0, 1: -2.0, 2: -3.0}}
              for metric, _ in default_search.METRICS}
    default_search._add_length_rule(values, {0: 10, 1: 64, 2: 65}, 64, "two", "one", "rule")
    for metric, _ in default_search.METRICS:
        assert values[metric]["rule"] == {0: 1.0, 1: 2.0, 2: -3.0}


def test_fifth_table_pairs_each_method_with_the_default_and_checks_the_rerun(write_results, tmp_path, monkeypatch):
    default_search = _default_search()
    lead = default_search.FOURTH_LEAD

    write = write_results
    cell = "minilm--tweets"
    # default comp 0.5, 0.3; LIG 0.4, 0.4 -> differences -0.1, +0.1: mean 0.000, s.e. 0.100
    # suff: default 0.1, 0.1; LIG 0.3, 0.2 -> +0.2, +0.1: mean +0.150, s.e. 0.050
    write(tmp_path / "fifth" / "tune" / cell, [(0, lead, 0.5, 0.1), (1, lead, 0.3, 0.1),
                                                (0, "ig", 0.4, 0.3), (1, "ig", 0.4, 0.2)])
    write(tmp_path / "fourth" / "tune" / cell, [(0, lead, 0.5, 0.1), (1, lead, 0.302, 0.1)])
    _, methods, title, name, ranked = default_search.ROUNDS["--fifth-table"]
    monkeypatch.setitem(default_search.ROUNDS, "--fifth-table", (tmp_path / "fifth", methods, title, name, ranked))
    monkeypatch.setattr(default_search, "FOURTH_DIR", tmp_path / "fourth")
    text = default_search._round_table("--fifth-table", tmp_path / "fifth.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith(f"| {cell} |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    header = next(line for line in text.splitlines() if line.startswith("| tune half |"))
    names = [c.strip() for c in header.strip("|").split("|")]
    assert cells[names.index("n")] == "2"
    assert cells[names.index("LIG-50 − default")] == "+0.000 ± 0.100 / +0.150 ± 0.050"
    assert cells[-1] == "2e-03"  # the rerun differs from the fourth round's default by 0.002 on example 1
    assert [c for c in cells[2:-1] if c != "+0.000 ± 0.100 / +0.150 ± 0.050"] == ["", ""]  # dampings not run here


def test_decoder_round_pairs_with_the_decoders_default_not_the_encoders(write_results, tmp_path, monkeypatch):
    default_search = _default_search()
    flag = "--seventh-decoders-table"
    lead, matrix_lead, _ = default_search.ROUND_LEADS[flag]
    assert (lead, matrix_lead) == ("ds:pow0.5:pm", "pr-tag-pm")
    cell = "smollm2--movie-sentences"
    # γ = 0.25 − the decoders' default: comp. +0.1, +0.3 (mean +0.200, s.e. 0.100); suff. 0, −0.2 (−0.100, 0.100);
    # the encoders' default is in the run too, so a table paired with it would show other numbers
    write_results(tmp_path / "dec" / "tune" / cell,
                  [(0, lead, 0.5, 0.2), (1, lead, 0.3, 0.4), (0, "ds:pow0.25:pm", 0.6, 0.2),
                   (1, "ds:pow0.25:pm", 0.6, 0.2), (0, "ds:pow0.5:pm0.25", 0.9, 0.0),
                   (1, "ds:pow0.5:pm0.25", 0.9, 0.0)])
    _, methods, title, name, ranked = default_search.ROUNDS[flag]
    monkeypatch.setitem(default_search.ROUNDS, flag, (tmp_path / "dec", methods, title, name, ranked))
    monkeypatch.setattr(default_search, "FOURTH_DIR", tmp_path / "fourth")
    monkeypatch.setattr(default_search, "MATRIX_DIR", tmp_path / "matrix")
    text = default_search._round_table(flag, tmp_path / "dec.md").read_text(encoding="utf-8")
    assert f"the default (`{lead}`" in text
    header = next(line for line in text.splitlines() if line.startswith("| tune half |"))
    names = [c.strip() for c in header.strip("|").split("|")]
    row = next(line for line in text.splitlines() if line.startswith(f"| {cell} |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[names.index("`ds:pow0.25:pm` − default")] == "+0.200 ± 0.100 / -0.100 ± 0.100"
    # the worst case ranks the decoders' two candidates: both lose most to the encoders' default here
    worst = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
             for line in text.split("## The rule's worst case")[1].splitlines() if line.startswith("| `")}
    assert set(worst) == {f"`{lead}`", "`ds:pow0.25:pm`"}
    assert worst[f"`{lead}`"][1:3] == ["+0.500 ± 0.100", cell]


def test_held_out_rows_pair_with_the_matrix_only_on_the_same_model(tmp_path, monkeypatch):
    default_search = _default_search()
    lead, other = default_search.FOURTH_LEAD, "ds:pow0.25:pm0.25"

    def write(folder, rows):  # (example, method, comp, suff, explained-class probability)
        folder.mkdir(parents=True)
        with (folder / "results.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=["example", "method", "comprehensiveness", "sufficiency", "prob"])
            w.writeheader()
            for example, method, comp, suff, prob in rows:
                w.writerow({"example": example, "method": method, "comprehensiveness": comp, "sufficiency": suff,
                            "prob": prob})

    # the same model on MiniLM tweets (probabilities equal); another model on MPNet tweets (0.02 apart)
    for cell, shift in (("minilm--tweets", 0.0), ("mpnet--tweets", 0.02)):
        write(tmp_path / "round" / "holdout" / cell, [(e, m, c, 0.1, 0.9 + 0.05 * e + shift) for e in range(2)
                                                     for m, c in ((lead, 0.5), (other, 0.6))])
        write(tmp_path / "matrix" / cell, [(e, m, c, 0.1, 0.9 + 0.05 * e) for e in range(2)
                                           for m, c in (("pr-tag-pm0.25", 0.5), ("ig", 0.3))])
    monkeypatch.setattr(default_search, "MATRIX_DIR", tmp_path / "matrix")
    assert default_search._model_difference(tmp_path / "round" / "holdout" / "mpnet--tweets" / "results.csv",
                                            tmp_path / "matrix" / "mpnet--tweets" / "results.csv") == \
        pytest.approx(0.02)
    lines = default_search._held_out_lines(tmp_path / "round", [lead, other])
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")] for line in lines
            if line.startswith("| m")}
    # the candidate against the default is always paired (one run); LIG's rows only where the model is the same
    assert rows["minilm--tweets"][2:5] == ["+0.100 ± 0.000 / +0.000 ± 0.000", "+0.200 ± 0.000 / +0.000 ± 0.000",
                                           "+0.300 ± 0.000 / +0.000 ± 0.000"]
    assert rows["mpnet--tweets"][2:] == ["+0.100 ± 0.000 / +0.000 ± 0.000", "other model", "other model",
                                         "other model"]


def test_round_worst_case_joins_the_fourth_rounds_run_only_on_the_same_model(write_results, tmp_path, monkeypatch):
    default_search = _default_search()
    lead, other = default_search.FOURTH_LEAD, "ds:pow0.25:pm0.25"

    write = write_results
    # tweets: the candidate is 0.1 behind the default on comprehensiveness; the fourth round's run of the same model
    # adds "ds:pow0.5:pm", 0.3 ahead of both, so the default's worst case becomes that loss
    write(tmp_path / "round" / "tune" / "minilm--tweets", [(0, lead, 0.5, 0.1), (1, lead, 0.5, 0.1),
                                                         (0, other, 0.4, 0.1), (1, other, 0.4, 0.1)])
    write(tmp_path / "fourth" / "tune" / "minilm--tweets", [(0, lead, 0.5, 0.1), (1, lead, 0.5, 0.1),
                                                          (0, "ds:pow0.5:pm", 0.8, 0.1), (1, "ds:pow0.5:pm", 0.8, 0.1)])
    # uncertainty: the fourth round ran another model (the default's rows differ by 0.2), so its rows stay out
    write(tmp_path / "round" / "tune" / "minilm--uncertainty", [(0, lead, 0.5, 0.1), (1, lead, 0.5, 0.1),
                                                              (0, other, 0.5, 0.1), (1, other, 0.5, 0.1)])
    write(tmp_path / "fourth" / "tune" / "minilm--uncertainty",
          [(0, lead, 0.7, 0.1), (1, lead, 0.7, 0.1), (0, "ds:pow0.5:pm", 1.5, 0.1), (1, "ds:pow0.5:pm", 1.5, 0.1)])
    monkeypatch.setattr(default_search, "FOURTH_DIR", tmp_path / "fourth")
    lines = default_search._worst_cases([tmp_path / "round"], [lead, other])
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")] for line in lines
            if line.startswith("| `")}
    assert rows[f"`{lead}`"][1:4] == ["+0.300 ± 0.000", "minilm--tweets", "comprehensiveness"]
    assert rows[f"`{other}`"][1:5] == ["+0.400 ± 0.000", "minilm--tweets", "comprehensiveness", "`ds:pow0.5:pm`"]


def test_depth_rule_takes_each_architectures_candidate_and_leaves_the_others_worst_cases_alone(write_results, tmp_path,
                                                                                               monkeypatch):
    default_search = _default_search()
    lead, other, rule = default_search.FOURTH_LEAD, "ds:pow0.25:pm0.25", "rule:depth"
    assert default_search.RULES[rule] == {"minilm": lead, "mpnet": other}
    write = write_results
    # MiniLM: γ = 0.25 is 0.1 behind the default on comprehensiveness; MPNet: the default is 0.2 behind γ = 0.25
    write(tmp_path / "round" / "tune" / "minilm--tweets", [(e, m, c, 0.1) for e in range(2)
                                                         for m, c in ((lead, 0.5), (other, 0.4))])
    write(tmp_path / "round" / "tune" / "mpnet--tweets", [(e, m, c, 0.1) for e in range(2)
                                                        for m, c in ((lead, 0.3), (other, 0.5))])
    monkeypatch.setattr(default_search, "FOURTH_DIR", tmp_path / "fourth")  # no fourth-round runs to join
    lines = default_search._worst_cases([tmp_path / "round"], [lead, other, rule])
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")] for line in lines
            if line.startswith("| `")}
    # each candidate's worst case is its loss where it is behind; the rule never counts as another method
    assert rows[f"`{lead}`"][1:5] == ["+0.200 ± 0.000", "mpnet--tweets", "comprehensiveness", f"`{other}`"]
    assert rows[f"`{other}`"][1:5] == ["+0.100 ± 0.000", "minilm--tweets", "comprehensiveness", f"`{lead}`"]
    # the rule takes the default's rows on MiniLM and γ = 0.25's on MPNet, each measured against the other one:
    # ahead by 0.1 and 0.2 on comprehensiveness, level on sufficiency (its worst case)
    assert rows[f"`{rule}`"][1:4] == ["+0.000 ± 0.000", "minilm--tweets", "sufficiency"]
    assert "comprehensiveness" not in rows[f"`{rule}`"]


def test_worst_case_over_several_rounds_takes_each_half_once_and_never_ranks_lig(write_results, tmp_path, monkeypatch):
    default_search = _default_search()
    lead, other = default_search.FOURTH_LEAD, "ds:pow0.25:pm0.25"
    write = write_results
    # the new round's MPNet BBC News half: LIG far ahead (not a candidate), the default 0.1 behind γ = 0.25
    write(tmp_path / "new" / "tune" / "mpnet--bbc-news", [(e, m, c, 0.1) for e in range(2)
                                                        for m, c in ((lead, 0.3), (other, 0.4), ("ig", 0.9))])
    # MiniLM tweets in both rounds: the new round's run counts, the older one (γ = 0.25 0.5 behind) does not
    write(tmp_path / "new" / "tune" / "minilm--tweets", [(e, m, c, 0.1) for e in range(2)
                                                       for m, c in ((lead, 0.5), (other, 0.45))])
    write(tmp_path / "old" / "tune" / "minilm--tweets", [(e, m, c, 0.1) for e in range(2)
                                                       for m, c in ((lead, 0.5), (other, 0.0))])
    # MPNet tweets in the older round only: γ = 0.25 0.2 behind on sufficiency
    write(tmp_path / "old" / "tune" / "mpnet--tweets", [(e, m, 0.5, s) for e in range(2)
                                                      for m, s in ((lead, 0.1), (other, 0.3))])
    monkeypatch.setattr(default_search, "FOURTH_DIR", tmp_path / "fourth")
    lines = default_search._worst_cases([tmp_path / "new", tmp_path / "old"], [lead, other])
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")] for line in lines
            if line.startswith("| `")}
    assert rows[f"`{lead}`"][1:5] == ["+0.100 ± 0.000", "mpnet--bbc-news", "comprehensiveness", f"`{other}`"]
    assert rows[f"`{other}`"][1:5] == ["+0.200 ± 0.000", "mpnet--tweets", "sufficiency", f"`{lead}`"]
    # the next-worst loss (the tie-break): the new round's MiniLM tweets, not the older round's 0.5
    assert rows[f"`{other}`"][5] == "+0.050 ± 0.000 (minilm--tweets comprehensiveness)"
    assert "`ig`" not in rows
    halves = next(line for line in lines if line.startswith("Tune halves:"))
    assert halves.startswith("Tune halves: ") and halves.count("minilm--tweets") == 1
    assert "mpnet--bbc-news" in halves and "mpnet--tweets" in halves


def test_gate_on_every_encoder_takes_the_tenth_rounds_gate_on_minilm_and_the_ninths_on_mpnet(write_results, tmp_path,
                                                                                             monkeypatch):
    """The tenth round's rule differs from the depth rule with the gate only on the 6-layer encoder's halves."""
    default_search = _default_search()
    lead, mpnet_gate, minilm_gate = default_search.FOURTH_LEAD, default_search.GATED[0], default_search.TENTH_GATE
    assert default_search.RULES["rule:gate-every-encoder"] == {"minilm": minilm_gate, "mpnet": mpnet_gate}
    assert default_search.GATE[minilm_gate] == default_search.GATE[mpnet_gate] == 0.5
    assert default_search.CANDIDATES[minilm_gate]["edge_weight"] == default_search.CANDIDATES[lead]["edge_weight"]
    write = write_results
    # MiniLM: the gate 0.1 ahead of the default on comprehensiveness; MPNet: its gate level with the default
    write(tmp_path / "round" / "tune" / "minilm--tweets", [(e, m, c, 0.1) for e in range(2)
                                                         for m, c in ((lead, 0.4), (minilm_gate, 0.5))])
    write(tmp_path / "round" / "tune" / "mpnet--tweets", [(e, m, 0.5, 0.1) for e in range(2)
                                                        for m in (lead, mpnet_gate)])
    monkeypatch.setattr(default_search, "FOURTH_DIR", tmp_path / "fourth")
    losses, _ = default_search._rule_losses([tmp_path / "round"], ["rule:depth-gate", "rule:gate-every-encoder"])
    worst = {rule: max(found, key=lambda x: x[0]) for rule, found in losses.items()}
    # the depth rule keeps the default on MiniLM, 0.1 behind the gate there; the new rule takes the gate
    assert worst["rule:depth-gate"][0] == pytest.approx(0.1)
    assert worst["rule:depth-gate"][2:4] == ("minilm--tweets", "comprehensiveness")
    assert worst["rule:gate-every-encoder"][0] <= 0.0


def test_eleventh_round_joins_an_earlier_run_of_a_half_only_where_its_two_walks_agree(write_results, tmp_path,
                                                                                      monkeypatch):
    """The eleventh round's halves take the earlier rounds' constructions as possible best others, but only from a
    run of the same model and examples (the two walks' rows agree), and the hub rule takes the hub rows per depth."""
    default_search = _default_search()
    two = "ds:pow0.25:pm0.25"
    hubs, minilm_hubs = default_search.ELEVENTH_HUBS[1], default_search.ELEVENTH_MINILM[1]
    assert default_search.RULES["rule:depth-gate-hubs"] == {"minilm": minilm_hubs, "mpnet": hubs}
    assert default_search.RELATIVE[hubs] == default_search.RELATIVE[minilm_hubs] == -1.0
    write_results(tmp_path / "eleventh" / "tune" / "mpnet--tweets", [(e, m, 0.5, 0.1) for e in range(2)
                                                                     for m in (two, hubs)])
    write_results(tmp_path / "ninth" / "tune" / "mpnet--tweets", [(e, m, c, 0.1) for e in range(2)
                                                                  for m, c in ((two, 0.5), ("ds:pow0.25", 0.7))])
    write_results(tmp_path / "ninth" / "tune" / "mpnet--bbc-news", [(e, m, c, 0.1) for e in range(2)
                                                                    for m, c in ((two, 0.2), ("ds:pow0.25", 0.7))])
    write_results(tmp_path / "eleventh" / "tune" / "mpnet--bbc-news", [(e, m, 0.5, 0.1) for e in range(2)
                                                                       for m in (two, hubs)])
    monkeypatch.setattr(default_search, "ELEVENTH_JOINS", (tmp_path / "ninth",))
    cells = default_search.CELLS
    joined = default_search._read_csv(tmp_path / "eleventh" / "tune" / "mpnet--tweets" / "results.csv")
    default_search._add_earlier_rows(cells["mpnet--tweets"], tmp_path / "eleventh" / "tune" / "mpnet--tweets", joined)
    assert joined["comprehensiveness"]["ds:pow0.25"] == {0: 0.7, 1: 0.7}
    # another model's run (its two walks 0.3 apart) is not joined
    apart = default_search._read_csv(tmp_path / "eleventh" / "tune" / "mpnet--bbc-news" / "results.csv")
    default_search._add_earlier_rows(cells["mpnet--bbc-news"], tmp_path / "eleventh" / "tune" / "mpnet--bbc-news",
                                     apart)
    assert "ds:pow0.25" not in apart["comprehensiveness"]


def test_tenth_rounds_gate_picks_count_one_walk_where_the_walks_agree_and_check_the_gate_against_them(write_results,
                                                                                                      tmp_path):
    default_search = _default_search()
    gate = default_search.TENTH_GATE
    one, two = default_search._WALK_PAIRS[0.5]
    folder = tmp_path / "tenth" / "tune" / "minilm--tweets"
    # example 0: the walks agree (0.9), so the gate's rows are one walk's; example 1 (0.1): the two walks', but the
    # gate's row is 0.05 off them
    write_results(folder, [(0, one, 0.7, 0.1), (1, one, 0.4, 0.3), (0, two, 0.6, 0.2), (1, two, 0.5, 0.2),
                           (0, gate, 0.7, 0.1), (1, gate, 0.55, 0.2)])
    (folder / "walk_correlation.csv").write_text("example,gamma,correlation\n0,0.5,0.9\n1,0.5,0.1\n0,0.25,0.1\n")
    lines = default_search._tenth_gate_lines([], tmp_path / "tenth")
    row = next(line for line in lines if line.startswith("| minilm--tweets"))
    assert [c.strip() for c in row.strip("|").split("|")] == ["minilm--tweets", "2", "1 of 2", "5e-02"]


def test_long_held_out_lines_pair_one_walk_with_each_encoders_own_default(write_results, tmp_path, monkeypatch):
    default_search = _default_search()
    # MPNet (12 layers): its default when the rounds ran is γ = 0.25's two walks; MiniLM (6 layers): γ = 0.5's. Each
    # cell also has the other depth's default, 0.3 ahead, so pairing with the wrong one would show -0.3 more
    for cell, default, other in (("mpnet--bbc-news", "pr-tag0.25-pm0.25", "pr-tag-pm0.25"),
                                 ("minilm--movie-reviews", "pr-tag-pm0.25", "pr-tag0.25-pm0.25")):
        write_results(tmp_path / "matrix" / cell, [(e, m, c, s) for e in range(2) for m, c, s in (
            (default, 0.4, 0.1), (other, 0.7, 0.1), ("pr-tag", 0.5, 0.05), ("ig", 0.45, 0.0))])
    monkeypatch.setattr(default_search, "MATRIX_DIR", tmp_path / "matrix")
    lines = default_search._long_held_out_lines()
    header = [c.strip() for c in next(line for line in lines if line.startswith("| cell")).strip("|").split("|")]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")] for line in lines
            if line.startswith("| m")}
    assert set(rows) == {"mpnet--bbc-news", "minilm--movie-reviews"}
    assert rows["mpnet--bbc-news"][header.index("default")] == "`pr-tag0.25-pm0.25`"
    assert rows["minilm--movie-reviews"][header.index("default")] == "`pr-tag-pm0.25`"
    for row in rows.values():
        assert row[header.index("PR-TAG (one walk) − default")] == "+0.100 ± 0.000 / -0.050 ± 0.000"
        assert row[header.index("default − LIG")] == "-0.050 ± 0.000 / +0.100 ± 0.000"
        assert row[header.index("default − AttnLRP")] == "–"  # no AttnLRP rows in these cells


def test_leaky_walk_is_pagerank_at_beta_0_and_lets_weak_rows_leak_at_beta_1(random_graph):
    import torch

    default_search = _default_search()
    adjacency, teleport, mask, reference = random_graph
    walk = default_search._leaky_walk(adjacency, teleport, mask, 0.7, 0.0)
    assert torch.allclose(walk, reference, atol=1e-9)
    # a chain 0 -> 1 -> 2 whose second edge is weak: at beta 1 node 1 passes on a tenth of its mass
    chain = torch.zeros(1, 3, 3, dtype=torch.float64)
    chain[0, 0, 1], chain[0, 1, 2] = 1.0, 0.1
    start = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)
    everything = torch.ones(1, 3, dtype=torch.bool)
    leaky = default_search._leaky_walk(chain, start, everything, 0.5, 1.0)
    plain = default_search._leaky_walk(chain, start, everything, 0.5, 0.0)
    # x1 = 0.5 x0, x2 = 0.5 * 0.1 x1 (leaky) or 0.5 x1 (plain), x0 = 0.5 + 0.5 x2 (node 2 is dangling: it leaks)
    assert leaky[0, 2] / leaky[0, 1] == pytest.approx(0.05)
    assert plain[0, 2] / plain[0, 1] == pytest.approx(0.5)
    assert float(leaky.sum()) == pytest.approx(1.0)


def test_relative_walks_are_pagerank_at_beta_0_and_demote_a_hub_at_beta_1(random_graph):
    """The ratio candidates (``RELATIVE``, β > 0) divide each walk by its graph's global PageRank to the power β."""
    from captum_prxai import GraphSpec
    from captum_prxai.graph.build import BuiltGraph

    default_search = _default_search()
    spec = GraphSpec(tol=1e-12, max_iter=1000)
    adjacency, teleport, mask, reference = random_graph
    (local,), (relative,) = default_search._relative_walks(spec, BuiltGraph("token", mask, teleport, adjacency), 0.0)
    assert torch.allclose(local, reference, atol=1e-9) and torch.allclose(relative, reference, atol=1e-9)
    assert float(relative[1, 4]) == 0.0
    # a star: every node points at hub 1, and node 0 (the teleport) points at 1 and 2 equally; the explained node's
    # walk reaches 1 and 2 alike, but 1 is reached from everywhere, so relative to that 2 ranks above it
    star = torch.zeros(1, 4, 4, dtype=torch.float64)
    star[0, :, 1] = 1.0
    star[0, 0, 2] = 1.0
    start = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    everything = torch.ones(1, 4, dtype=torch.bool)
    (local,), (relative,) = default_search._relative_walks(spec, BuiltGraph("token", everything, start, star), 1.0)
    assert float(local[0, 1]) > float(local[0, 2])
    assert float(relative[0, 2]) > float(relative[0, 1])
    assert float(relative.sum()) == pytest.approx(1.0)


def test_one_pass_through_the_public_pipeline_is_the_attributions_own_pass(tiny):
    """``_one_pass`` runs what an attribution cannot run by itself (a per-layer term of its own, the first layer's
    gradient x input besides its scores) through the library's public capture_graph, build_graph and score_graph:
    with nothing of its own it is the attribution's ``attribute_graph`` exactly, graph and scores."""
    import captum_prxai

    default_search = _default_search()
    model, tokenizer = tiny
    enc = tokenizer(["good film but a dull plot", "bad"], return_tensors="pt", padding=True)
    ids, mask, target = enc["input_ids"], enc["attention_mask"], torch.tensor([1, 0])
    layers = captum_prxai.attention_layers(model)

    def forward(input_ids, attention_mask=None):
        return model(input_ids, attention_mask=attention_mask).logits

    for options in (dict(edge_weight="attention", hub_power=0.0), dict(
            edge_weight="tempered_attention_gradient", attention_power=0.25, walks="both", negative_weight=0.25,
            walk_gate=0.5, hub_power=0.5, objective="log_probability", propagation="conservative",
            relevance_weight=1.0)):
        attr = captum_prxai.PageRankAttribution(forward, layers, **options)
        expected = attr.attribute_graph(ids, target=target, additional_forward_args=(mask,))
        gradients = options["edge_weight"] != "attention"
        for input_gradient in (False, True) if gradients else (False,):
            built, scores = default_search._one_pass(attr, ids, mask, target, input_gradient=input_gradient)
            assert torch.equal(scores, expected.scores) and torch.equal(built.adjacency, expected.built.adjacency)
            assert (built.input_gradient is not None) == gradients  # asked for, or the relevance weight's
            if gradients:
                assert torch.equal(built.input_gradient, expected.built.input_gradient)
        # the gradient-norm layer weights (``ds:pow0.5:l2w``) change the graph the same pass builds
        weighted, _ = default_search._one_pass(attr, ids, mask, target,
                                               layer_term=default_search._gradient_norm_weighted(attr.spec))
        assert not torch.allclose(weighted.adjacency, expected.built.adjacency)


def test_relative_scores_raising_the_hubs_equal_the_librarys_hub_power(tiny):
    """The eleventh round's hub candidates were scored by the benchmark's own walk before ``hub_power`` existed; the
    library's option gives the same scores, so their cached rows stand."""
    import captum_prxai

    default_search = _default_search()
    model, tokenizer = tiny
    enc = tokenizer(["good film but a dull plot", "bad"], return_tensors="pt", padding=True)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    layers = captum_prxai.attention_layers(model)

    def forward(input_ids, attention_mask=None):
        return model(input_ids, attention_mask=attention_mask).logits

    settings = dict(edge_weight="tempered_attention_gradient", attention_power=0.25, walks="both",
                    negative_weight=0.25, walk_gate=0.5, propagation="gradient", relevance_weight=0)
    plain = captum_prxai.PageRankAttribution(forward, layers, hub_power=0, **settings)
    for beta in (-0.5, -1.0):
        hubs = captum_prxai.PageRankAttribution(forward, layers, hub_power=-beta, **settings)
        expected = default_search._relative_scores(plain, ids, mask, 1, beta)
        got = hubs.attribute(ids, target=1, additional_forward_args=(mask,))
        torch.testing.assert_close(got, expected.to(got.dtype), atol=1e-5, rtol=0)
        assert (got - plain.attribute(ids, target=1, additional_forward_args=(mask,))).abs().max() > 1e-3


def test_walk_correlation_leaves_out_the_masked_tokens_and_is_zero_for_a_constant_walk():
    default_search = _default_search()
    positive = torch.tensor([[0.9, 0.1, 0.2, 0.3, 0.4]])
    negative = torch.tensor([[0.9, 0.4, 0.3, 0.2, 0.1]])
    ordinary = torch.tensor([[False, True, True, True, True]])
    # over the four ordinary tokens the walks are reversed; the shared first token would make them agree
    assert default_search.walk_correlation(positive, negative, ordinary) == pytest.approx(-1.0)
    assert default_search.walk_correlation(positive, negative, torch.ones_like(ordinary)) > 0.5
    assert default_search.walk_correlation(positive, torch.full_like(negative, 0.2), ordinary) == 0.0


def test_walk_correlation_file_recovers_the_negative_walk_from_the_cached_scores(tmp_path):
    import csv
    import json

    default_search = _default_search()
    positive = [0.5, 0.1, 0.2, 0.3, 0.4]
    negatives = {0: [0.5, 0.4, 0.3, 0.2, 0.1], 1: [0.5, 0.1, 0.2, 0.3, 0.45]}  # reversed / the same order
    with (tmp_path / "cache.jsonl").open("w") as fh:
        for example, negative in negatives.items():
            both = [p - 0.25 * n for p, n in zip(positive, negative)]
            for method, scores in (("ds:pow0.25", positive), ("ds:pow0.25:pm0.25", both), ("gae", negative)):
                fh.write(json.dumps({"example": example, "method": method, "scores": scores,
                                     "tokens": ["<s>", "a", "b", "c", "</s>"]}) + "\n")
    path = default_search.write_walk_correlation(tmp_path)
    with path.open() as fh:
        rows = {int(r["example"]): (float(r["gamma"]), float(r["correlation"])) for r in csv.DictReader(fh)}
    assert rows[0] == (0.25, pytest.approx(-1.0, abs=1e-5))
    expected = default_search.walk_correlation(torch.tensor(positive), torch.tensor(negatives[1]),
                                               torch.tensor([False, True, True, True, True]))
    assert rows[1] == (0.25, pytest.approx(expected, abs=1e-5)) and expected > 0.9


def test_gate_scan_takes_one_walk_where_the_walks_agree_and_ranks_each_threshold_by_the_rule(write_results, tmp_path,
                                                                                             monkeypatch):
    import csv

    default_search = _default_search()
    lead, one, two = default_search.FOURTH_LEAD, "ds:pow0.25", "ds:pow0.25:pm0.25"
    write = write_results
    # MPNet: one walk 0.2 ahead on example 0 (walks agree, 0.9), 0.3 behind on example 1 (they disagree, 0.1)
    folder = tmp_path / "round" / "tune" / "mpnet--tweets"
    write(folder, [(0, one, 0.7, 0.1), (0, two, 0.5, 0.1), (1, one, 0.3, 0.1), (1, two, 0.6, 0.1),
                   (0, lead, 0.4, 0.1), (1, lead, 0.4, 0.1)])
    with (folder / "walk_correlation.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerows([["example", "gamma", "correlation"], [0, 0.25, 0.9], [1, 0.25, 0.1], [0, 0.5, -0.9]])
    # MiniLM: the default level with the other method
    write(tmp_path / "round" / "tune" / "minilm--tweets", [(e, m, 0.5, 0.1) for e in range(2) for m in (lead, one)])
    monkeypatch.setattr(default_search, "FOURTH_DIR", tmp_path / "fourth")
    values = default_search._read_csv(folder / "results.csv")
    gated = default_search._gated(values, default_search._read_correlation(folder, 0.25), 0.5)
    assert gated["comprehensiveness"] == {0: 0.7, 1: 0.6}
    lines = default_search._gate_scan_lines([tmp_path / "round"], (-1.0, 0.5, 1.0))
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")] for line in lines
            if line.startswith("| ") and not line.startswith("| threshold")}
    # one walk everywhere trails the two walks by 0.05 on MPNet; the gate at 0.5 takes the better walk on both
    # examples, so it is ahead of both there and level on MiniLM (its worst case is a tie, 0)
    assert rows["-1"][1:5] == ["1.00", "+0.050 ± 0.250", "mpnet--tweets", "comprehensiveness"]
    assert rows["0.5"][1:3] == ["0.50", "+0.000 ± 0.000"]
    assert rows["1"][1] == "0.00"
    # a 12-layer half without correlations cannot be gated
    (folder / "walk_correlation.csv").unlink()
    with pytest.raises(SystemExit, match="walk_correlation.csv"):
        default_search._gate_scan_lines([tmp_path / "round"], (0.5,))


def test_gate_rows_are_read_where_it_did_not_run_and_checked_where_it_did(write_results, tmp_path, monkeypatch):
    import csv

    default_search = _default_search()
    one, two, gate = "ds:pow0.25", "ds:pow0.25:pm0.25", default_search.GATED[0]
    threshold = default_search.GATE[gate]
    correlations = {0: threshold + 0.1, 1: threshold - 0.1}  # example 0 takes one walk, example 1 two walks
    for cell, live in (("mpnet--tweets", {0: 0.7, 1: 0.45}), ("mpnet--bbc-news", None)):
        folder = tmp_path / "round" / "tune" / cell
        rows = [(0, one, 0.7, 0.1), (0, two, 0.5, 0.2), (1, one, 0.3, 0.1), (1, two, 0.4, 0.2)]
        write_results(folder, rows + ([(e, gate, c, 0.1 if e == 0 else 0.2) for e, c in live.items()]
                                      if live else []))
        with (folder / "walk_correlation.csv").open("w", newline="") as fh:
            csv.writer(fh).writerows([["example", "gamma", "correlation"]]
                                     + [[e, 0.25, r] for e, r in correlations.items()])
    # BBC News: the gate did not run; its rows are the picked walk's
    values = default_search._read_csv(tmp_path / "round" / "tune" / "mpnet--bbc-news" / "results.csv")
    default_search._add_gate_rows(default_search.CELLS["mpnet--bbc-news"],
                                  tmp_path / "round" / "tune" / "mpnet--bbc-news", values)
    assert values["comprehensiveness"][gate] == {0: 0.7, 1: 0.4}
    assert values["sufficiency"][gate] == {0: 0.1, 1: 0.2}
    # tweets: the gate ran, and its example 1 is 0.05 off the two walks it should have taken
    lines = default_search._gate_check_lines(tmp_path / "round")
    checks = [line for line in lines if line.startswith("| tune/")]
    assert checks == [f"| tune/mpnet--tweets | `{gate}` | 2 | 5e-02 |"]


def test_the_library_gate_in_the_matrix_is_checked_against_the_rounds_picks(write_results, tmp_path, monkeypatch):
    import csv

    default_search = _default_search()
    library, name = default_search.LIBRARY_GATE
    one, two = "ds:pow0.25", "ds:pow0.25:pm0.25"
    folder = tmp_path / "round" / "holdout" / "mpnet--tweets"
    write_results(folder, [(0, one, 0.7, 0.1), (0, two, 0.5, 0.2), (1, one, 0.3, 0.1), (1, two, 0.4, 0.2),
                           (2, one, 0.6, 0.3), (2, two, 0.6, 0.1)])
    threshold = default_search.GATE[name]
    with (folder / "walk_correlation.csv").open("w", newline="") as fh:
        csv.writer(fh).writerows([["example", "gamma", "correlation"], [0, 0.25, threshold + 0.1],
                                  [1, 0.25, threshold - 0.1], [2, 0.25, threshold + 0.2]])
    # the matrix: examples 0 and 1 equal the picks (one walk, two walks); example 2 took two walks, not one
    write_results(tmp_path / "matrix" / "mpnet--tweets", [(0, library, 0.7, 0.1), (1, library, 0.4, 0.2),
                                                          (2, library, 0.6, 0.1), (3, library, 0.9, 0.9)])
    monkeypatch.setattr(default_search, "MATRIX_DIR", tmp_path / "matrix")
    lines = default_search._library_gate_lines(tmp_path / "round")
    assert [line for line in lines if line.startswith("| mpnet")] == ["| mpnet--tweets | 3 | 2 of 3 | 2e-01 |"]
    # a matrix without the library's rows gives no section
    (tmp_path / "matrix" / "mpnet--tweets" / "results.csv").unlink()
    write_results(tmp_path / "matrix2" / "mpnet--tweets", [(0, two, 0.5, 0.2)])
    monkeypatch.setattr(default_search, "MATRIX_DIR", tmp_path / "matrix2")
    assert default_search._library_gate_lines(tmp_path / "round") == []


def _candidates_on_one_sentence(tiny):
    """The benchmark's candidates registered, and one sentence on the tiny model: ``(model, forward, ids, mask,
    layers)``, ``forward(input_ids, attention_mask)`` giving the logits."""
    import captum_prxai

    _default_search().register_candidates()
    model, tokenizer = tiny
    enc = tokenizer(["good film but a dull plot"], return_tensors="pt")

    def forward(input_ids, attention_mask=None):
        return model(input_ids, attention_mask=attention_mask).logits

    return model, forward, enc["input_ids"], enc["attention_mask"], list(captum_prxai.attention_layers(model))


def test_twelfth_round_layer_shares_walk_on_that_part_of_the_layers_with_the_defaults_other_settings(tiny):
    """The twelfth round's layer-subset candidates are the 12-layer default (hubs 0.5, gate 0.5, λ = 0.25) on the
    first or last share of the attention layers; its other candidates change one option each."""
    import captum_prxai
    from captum_prxai.methods.registry import METHODS, MethodContext

    model, forward, ids, mask, layers = _candidates_on_one_sentence(tiny)

    settings = dict(edge_weight="tempered_attention_gradient", attention_power=0.25, walks="both",
                    negative_weight=0.25, walk_gate=0.5, hub_power=0.5, objective="output", propagation="gradient",
                    relevance_weight=0)
    for name, part in (("ds:pow0.25:pm0.25:gate0.5:rel-0.5:late0.5", layers[1:]),
                       ("ds:pow0.25:pm0.25:gate0.5:rel-0.5:early0.5", layers[:1])):
        explainer = METHODS[name].factory(model, forward, MethodContext())
        assert list(explainer.attribution.layers) == part
        expected = captum_prxai.PageRankAttribution(forward, part, **settings)
        got = explainer(ids, mask, torch.zeros_like(ids), torch.tensor([1]))
        torch.testing.assert_close(got, expected.attribute(ids, target=1, additional_forward_args=(mask,)))
    spec = METHODS["ds:pow0.25:pm0.25:gate0.5:rel-2"].factory(model, forward, MethodContext()).attribution.spec
    assert (spec.hub_power, spec.walk_gate, spec.negative_weight, spec.edge_weight.gamma) == (2.0, 0.5, 0.25, 0.25)
    spec = METHODS["ds:pow0.25:pm0.25:gate0.5:uniform"].factory(model, forward, MethodContext()).attribution.spec
    assert (spec.teleport, spec.hub_power) == ("uniform", 0.0)
    spec = METHODS["ds:pow0.25:pm0.25:gate0.5:max:rel-1"].factory(model, forward, MethodContext()).attribution.spec
    assert (spec.head_reduction, spec.hub_power) == ("max", 1.0)
    # the log-probability candidate: the default's walks on the gradient of log softmax(logits)[target]
    got = METHODS["ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp"].factory(model, forward, MethodContext())(
        ids, mask, torch.zeros_like(ids), torch.tensor([1]))
    log_prob = captum_prxai.PageRankAttribution(lambda *a, **k: torch.log_softmax(forward(*a, **k), -1), layers,
                                                **settings)
    torch.testing.assert_close(got, log_prob.attribute(ids, target=1, additional_forward_args=(mask,)))
    assert (got - captum_prxai.PageRankAttribution(forward, layers, **settings).attribute(
        ids, target=1, additional_forward_args=(mask,))).abs().max() > 1e-4
    # ... which is the registry's 12-layer default since the thirteenth round, on these layers
    default = METHODS["pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp"].factory(model, forward, MethodContext())
    torch.testing.assert_close(got, default(ids, mask, torch.zeros_like(ids), torch.tensor([1])))


def test_fifteenth_round_adds_the_same_passs_gradient_x_input_to_the_12_layer_default(tiny):
    """``:+ixg<κ>``: the 12-layer default's scores plus κ times gradient x input at the first attention layer's input
    (the same backward pass of the class's log-probability), scaled to unit L1 mass over the tokens."""
    from captum_prxai.methods.registry import METHODS, MethodContext

    model, forward, ids, mask, layers = _candidates_on_one_sentence(tiny)

    def explain(name):
        return METHODS[name].factory(model, forward, MethodContext())(ids, mask, torch.zeros_like(ids),
                                                                      torch.tensor([1]))

    default = explain("pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp")
    seen = {}

    def grab(module, args, kwargs):  # the hidden states entering the first attention layer
        hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        hidden.retain_grad()
        seen["hidden"] = hidden

    handle = layers[0].register_forward_pre_hook(grab, with_kwargs=True)
    try:
        torch.log_softmax(forward(ids, attention_mask=mask), -1)[0, 1].backward()
    finally:
        handle.remove()
    own = (seen["hidden"].grad * seen["hidden"]).sum(-1).detach().to(default.dtype)
    assert float(own.abs().min()) > 0
    for kappa in ("0.05", "0.25", "1"):
        got = explain(f"ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp:+ixg{kappa}")
        torch.testing.assert_close(got, default + float(kappa) * own / own.abs().sum(), atol=1e-5, rtol=0)


def test_fifteenth_round_averages_each_layers_heads_signed_before_the_positive_part():
    """``NetPowerGradient``: two heads that push one edge opposite ways cancel, where each head's positive part (the
    default's ``PowerGradient``) keeps the push for it; the negative walk's edges are the net push against."""
    default_search = _default_search()
    attention = torch.full((1, 2, 1, 2), 0.5)
    grad = torch.tensor([[[[1.0, -1.0]], [[-3.0, 1.0]]]])  # (B, H, T, T): head 0 and head 1
    scale = 0.5 ** 0.25
    net = default_search.NetPowerGradient(0.25)
    torch.testing.assert_close(net(attention, grad), torch.tensor([[[0.0, 0.0]]]))
    torch.testing.assert_close(net(attention, -grad), torch.tensor([[[scale, 0.0]]]))
    per_head = default_search.PowerGradient(0.25)(attention, grad).mean(dim=1)
    torch.testing.assert_close(per_head, torch.tensor([[[scale / 2, scale / 2]]]))


def test_sixteenth_round_cancels_part_of_the_heads_push_or_masks_the_edges_they_push_against(tiny):
    """``PartNetPowerGradient``: ρ = 0 is the default's edges (each head's positive part, mean over heads), ρ = 1
    :class:`NetPowerGradient`, ρ = 0.5 between; ``NetMaskedPowerGradient`` keeps the default's weight on the edges
    the heads push for on the net; ``AgreementPowerGradient`` scales it by the heads' agreement, the default's where
    they all agree. On the tiny model, the ρ = 0 candidate scores as the default."""
    from captum_prxai.methods.registry import METHODS, MethodContext

    default_search = _default_search()
    attention = torch.full((1, 2, 1, 3), 0.5)
    grad = torch.tensor([[[[1.0, -1.0, 2.0]], [[-3.0, 1.0, -1.0]]]])  # (B, H, T, T): head 0 and head 1
    scale = 0.5 ** 0.25
    per_head = default_search.PowerGradient(0.25)(attention, grad).mean(dim=1)
    torch.testing.assert_close(default_search.PartNetPowerGradient(0.25, 0.0)(attention, grad), per_head)
    for sign in (1, -1):
        torch.testing.assert_close(default_search.PartNetPowerGradient(0.25, 1.0)(attention, sign * grad),
                                   default_search.NetPowerGradient(0.25)(attention, sign * grad))
    # edge 0: for 0.5, against 1.5; edge 1: for 0.5, against 0.5; edge 2: for 1, against 0.5 (times scale)
    half = default_search.PartNetPowerGradient(0.25, 0.5)(attention, grad)
    torch.testing.assert_close(half, scale * torch.tensor([[[0.0, 0.25, 0.75]]]))
    masked = default_search.NetMaskedPowerGradient(0.25)
    torch.testing.assert_close(masked(attention, grad), scale * torch.tensor([[[0.0, 0.0, 1.0]]]))
    torch.testing.assert_close(masked(attention, -grad), scale * torch.tensor([[[1.5, 0.0, 0.0]]]))
    # agreement c = mean e / mean |e|: edge 0 −1/2, edge 1 0, edge 2 1/3; the default's edge times (1 + c) / 2
    agree = default_search.AgreementPowerGradient(0.25)
    torch.testing.assert_close(agree(attention, grad), scale * torch.tensor([[[0.5 / 4, 0.5 / 2, 2 / 3]]]))
    torch.testing.assert_close(agree(attention, -grad), scale * torch.tensor([[[1.5 * 3 / 4, 0.5 / 2, 0.5 / 3]]]))
    unanimous = torch.tensor([[[[1.0, 2.0, 0.5]], [[3.0, 1.0, 0.5]]]])
    torch.testing.assert_close(agree(attention, unanimous), default_search.PowerGradient(0.25)(attention, unanimous)
                               .mean(dim=1))

    model, forward, ids, mask, layers = _candidates_on_one_sentence(tiny)
    default_search.CANDIDATES["ds:partnet0:pm0.25:gate0.5:rel-0.5:lp"] = {
        **default_search.CANDIDATES["ds:partnet0.5:pm0.25:gate0.5:rel-0.5:lp"], "edge_weight": "partnet0pow0.25"}
    try:
        for extra in (default_search.LOG_PROB, default_search.SIGNED_WALKS):
            extra.add("ds:partnet0:pm0.25:gate0.5:rel-0.5:lp")
        for table, value in ((default_search.NEGATIVE_WEIGHT, 0.25), (default_search.GATE, 0.5),
                             (default_search.RELATIVE, -0.5)):
            table["ds:partnet0:pm0.25:gate0.5:rel-0.5:lp"] = value
        default_search.register_candidates()

        def explain(name):
            return METHODS[name].factory(model, forward, MethodContext())(ids, mask, torch.zeros_like(ids),
                                                                          torch.tensor([1]))

        torch.testing.assert_close(explain("ds:partnet0:pm0.25:gate0.5:rel-0.5:lp"),
                                   explain("pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp"), atol=1e-6, rtol=0)
        assert not torch.allclose(explain("ds:partnet0.5:pm0.25:gate0.5:rel-0.5:lp"),
                                  explain("pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp"), atol=1e-6)
    finally:
        default_search.CANDIDATES.pop("ds:partnet0:pm0.25:gate0.5:rel-0.5:lp")
        for extra in (default_search.LOG_PROB, default_search.SIGNED_WALKS):
            extra.discard("ds:partnet0:pm0.25:gate0.5:rel-0.5:lp")
        for table in (default_search.NEGATIVE_WEIGHT, default_search.GATE, default_search.RELATIVE):
            table.pop("ds:partnet0:pm0.25:gate0.5:rel-0.5:lp")
        METHODS.pop("ds:partnet0:pm0.25:gate0.5:rel-0.5:lp", None)


def test_sixteenth_round_path_candidates_average_the_graphs_along_the_integrated_gradients_path(tiny):
    """``:path<m>``: the default's token graphs averaged over m inputs between the [PAD] reference and the input
    (word embeddings ``b + α (e − b)``). Where the reference is the input itself every pass sees the same input, so
    the scores are the default's; on a sentence they are not, and the embeddings are left unhooked afterwards."""
    from captum_prxai.methods.registry import METHODS, MethodContext

    default_search = _default_search()
    model, forward, ids, mask, layers = _candidates_on_one_sentence(tiny)
    assert default_search.PATH == {"ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp:path8": 8,
                                   "ds:pow0.5:pm0.25:rel-0.5:lp:path8": 8}
    special = torch.zeros_like(ids)

    def explain(name, inputs, pad):
        return METHODS[name].factory(model, forward, MethodContext(pad_token_id=pad))(
            inputs, mask, special, torch.tensor([1]))

    same = torch.full_like(ids, int(ids[0, 1]))
    for path, lead in (("ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp:path8", "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp"),
                       ("ds:pow0.5:pm0.25:rel-0.5:lp:path8", "pr-tag-pm0.25-hubs0.5-lp")):
        torch.testing.assert_close(explain(path, same, int(ids[0, 1])), explain(lead, same, 0), atol=1e-5, rtol=0)
        on_path = explain(path, ids, 0)
        assert not torch.allclose(on_path, explain(lead, ids, 0), atol=1e-4)
        assert not model.get_input_embeddings()._forward_hooks
        torch.testing.assert_close(explain(path, ids, 0), on_path)


def test_sixteenth_round_decoder_hubs_candidate_is_the_decoders_default_with_the_hubs_weight(tiny):
    """``ds:pow0.5:lp:pm:rel-0.5``: PR-TAG± (λ = 1) on the class's log-probability, each walk weighed by its graph's
    hubs (hub power 0.5): the library's attribution with those settings."""
    import captum_prxai
    from captum_prxai.methods.registry import METHODS, MethodContext

    model, forward, ids, mask, layers = _candidates_on_one_sentence(tiny)
    got = METHODS["ds:pow0.5:lp:pm:rel-0.5"].factory(model, forward, MethodContext())(
        ids, mask, torch.zeros_like(ids), torch.tensor([1]))
    expected = captum_prxai.PageRankAttribution(
        forward, layers, edge_weight="tempered_attention_gradient", attention_power=0.5, walks="both",
        negative_weight=1.0, hub_power=0.5, objective="log_probability", damping=0.7, normalize_layers=False,
        teleport="target", graph="token", signed=False, walk_gate=None, propagation="gradient",
        relevance_weight=0).attribute(
        ids, target=torch.tensor([1]), additional_forward_args=(mask,))
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)
    without = METHODS["ds:pow0.5:lp:pm"].factory(model, forward, MethodContext())(
        ids, mask, torch.zeros_like(ids), torch.tensor([1]))
    assert not torch.allclose(got, without, atol=1e-5)


def test_seventeenth_round_candidates_are_the_default_from_the_conservative_pass(tiny):
    """``:cp`` is the default from the library's conservative pass (registry ``-lp-cp``), and differs from the default
    on a sentence; ``:cp*cpixg`` is that times ``1 + R / max|R|``, the library's relevance weight (``-lp-cp-rel``);
    ``cp-lrp`` is Input x Gradient inside ``conservative_propagation`` and differs from Input x Gradient. (The round
    held the projections and norms with forward hooks; tests/test_conservative.py checks the two agree.)"""
    from captum_prxai.conservative import conservative_propagation
    from captum_prxai.methods.registry import METHODS, MethodContext

    default_search = _default_search()
    model, forward, ids, mask, layers = _candidates_on_one_sentence(tiny)
    special = torch.zeros_like(ids)
    target = torch.tensor([1])

    def explain(name):
        return METHODS[name].factory(model, forward, MethodContext())(ids, mask, special, target)

    assert default_search.CONSERVATIVE == set(default_search.SEVENTEENTH_NEW + default_search.SEVENTEENTH_MINILM
                                               + default_search.SEVENTEENTH_DECODERS[1:])
    for lead, cp in (("pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp", "ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp:cp"),
                     ("pr-tag-pm0.25-hubs0.5-lp", "ds:pow0.5:pm0.25:rel-0.5:lp:cp")):
        got = explain(cp)
        torch.testing.assert_close(got, explain(lead + "-cp"), atol=1e-6, rtol=0)
        assert not torch.allclose(got, explain(lead), atol=1e-4)
        fused = explain(cp + "*cpixg")
        torch.testing.assert_close(fused, explain(lead + "-cp-rel"), atol=1e-6, rtol=0)
        attr = METHODS[lead + "-cp"].factory(model, forward, MethodContext()).attribution
        attr.relevance_weight = 1.0
        out = attr.attribute_graph(ids, target=target, additional_forward_args=(mask,))
        relevance = out.built.input_gradient * mask
        torch.testing.assert_close(fused, got * (1 + relevance / relevance.abs().max()), atol=1e-6, rtol=0)
    ixg = METHODS["ixg"].factory(model, forward, MethodContext())
    with conservative_propagation():
        expected = ixg(ids, mask, special, target)
    torch.testing.assert_close(explain("cp-lrp"), expected)
    assert not torch.allclose(explain("cp-lrp"), ixg(ids, mask, special, target), atol=1e-5)


def test_seventeenth_round_decoder_candidates_hold_the_softmax_and_with_cpnorm_the_rmsnorm_scales(tiny_decoder):
    """The decoders' candidates: ``:cp`` and ``:cp*cpixg`` are the decoders' default (PR-TAG±, λ = 1, log-prob.) from
    the library's conservative pass, without and with the relevance weight; ``:cpnorm*cpixg`` also holds every
    RMSNorm's scale by forward hooks (Llama writes its RMSNorm out by hand, which the library's mode does not see):
    each hooked norm gives the module's own output, and every hook is gone afterwards."""
    import captum_prxai
    from captum_prxai.methods.registry import METHODS, MethodContext

    default_search = _default_search()
    default_search.register_candidates()
    model, tokenizer = tiny_decoder
    enc = tokenizer(["good film but a dull plot"], return_tensors="pt")
    ids, mask = enc["input_ids"], enc["attention_mask"]

    def forward(input_ids, attention_mask=None):
        return model(input_ids, attention_mask=attention_mask).logits

    def explain(name):
        return METHODS[name].factory(model, forward, MethodContext())(ids, mask, torch.zeros_like(ids),
                                                                      torch.tensor([1]))

    layers = captum_prxai.attention_layers(model)
    settings = dict(edge_weight="tempered_attention_gradient", attention_power=0.5, walks="both", negative_weight=1.0,
                    hub_power=0.0, objective="log_probability", walk_gate=None)
    for name, weight in (("ds:pow0.5:lp:pm:cp", 0.0), ("ds:pow0.5:lp:pm:cp*cpixg", 1.0)):
        expected = captum_prxai.PageRankAttribution(forward, layers, propagation="conservative",
                                                    relevance_weight=weight, **settings).attribute(
            ids, target=torch.tensor([1]), additional_forward_args=(mask,))
        torch.testing.assert_close(explain(name), expected, atol=1e-6, rtol=0)
    norms = [m for m in model.modules() if type(m).__name__.endswith("RMSNorm")]
    x = torch.randn(1, 3, 16)
    for norm in norms:
        torch.testing.assert_close(default_search._rms_norm_held(norm, (x,), norm(x)), norm(x))
        # held: the backward pass sees weight / rms(x) as a constant scale
        leaf, v = x.clone().requires_grad_(), torch.randn(1, 3, 16)
        grad, = torch.autograd.grad((default_search._rms_norm_held(norm, (leaf,), None) * v).sum(), leaf)
        rms = (x.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon).sqrt()
        torch.testing.assert_close(grad, norm.weight.detach() * v / rms)
    held = explain("ds:pow0.5:lp:pm:cpnorm*cpixg")
    assert not torch.allclose(held, explain("ds:pow0.5:lp:pm:cp*cpixg"), atol=1e-6)
    assert not [m for m in model.modules() if m._forward_hooks]


def _binned_round_table(default_search, flag, tmp_path, monkeypatch, halves):
    """A round's table (``_round_table``) written from ``halves``: cell -> rows ``(example, method, comp., suff.,
    comp.@50, suff.@1)``, each cell's tune half a ``results.csv`` in a folder standing in for the round's."""
    import csv

    _, methods, title, name, ranked = default_search.ROUNDS[flag]
    fields = ["example", "method", "comprehensiveness", "sufficiency", "comprehensiveness@50", "sufficiency@1"]
    for cell, rows in halves.items():
        folder = tmp_path / "round" / "tune" / cell
        folder.mkdir(parents=True)
        with (folder / "results.csv").open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(fields)
            w.writerows(rows)
    monkeypatch.setitem(default_search.ROUNDS, flag, (tmp_path / "round", methods, title, name, ranked))
    return default_search._round_table(flag, tmp_path / "round.md").read_text(encoding="utf-8")


def test_twelfth_table_has_a_row_per_construction_with_the_bins_where_lig_leads(tmp_path, monkeypatch):
    default_search = _default_search()
    flag = "--twelfth-table"
    lead = default_search.ROUND_LEADS[flag][0]
    assert lead == "ds:pow0.25:pm0.25:gate0.5:rel-0.5"
    other = "ds:pow0.25:pm0.25:gate0.5:rel-0.5:nl"
    cell = "mpnet--bbc-news"
    # other − default: comp. +0.1, +0.3 (+0.200 ± 0.100); suff. 0, −0.2 (−0.100 ± 0.100);
    # comp.@50 +0.4, +0.4 (+0.400 ± 0.000); suff.@1 −0.1, +0.1 (+0.000 ± 0.100)
    rows = [(0, lead, 0.5, 0.2, 0.1, 0.3), (1, lead, 0.3, 0.4, 0.2, 0.3),
            (0, other, 0.6, 0.2, 0.5, 0.2), (1, other, 0.6, 0.2, 0.6, 0.4)]
    text = _binned_round_table(default_search, flag, tmp_path, monkeypatch, {cell: rows})
    header = next(line for line in text.splitlines() if line.startswith("| construction |"))
    names = [c.strip() for c in header.strip("|").split("|")]
    assert names == ["construction", f"{cell} (n=2)", f"{cell} comp.@50%", f"{cell} suff.@1%"]
    row = next(line for line in text.splitlines() if line.startswith(f"| `{other}` |"))
    assert [c.strip() for c in row.strip("|").split("|")][1:] == ["+0.200 ± 0.100 / -0.100 ± 0.100",
                                                                  "+0.400 ± 0.000", "+0.000 ± 0.100"]
    row = next(line for line in text.splitlines() if line.startswith("| LIG-50 |"))
    assert row.count("–") == 3  # not run in this folder


@pytest.mark.parametrize("flag, mpnet, minilm", [("--fifteenth-table", ("FIFTEENTH_NEW", -1), ("FIFTEENTH_MINILM", 0)),
                                                  ("--sixteenth-table", ("SIXTEENTH_NEW", 0), ("SIXTEENTH_MINILM", 0))])
def test_round_tables_pair_each_architectures_own_default_and_construction(tmp_path, monkeypatch, flag, mpnet, minilm):
    """On a MiniLM half the fifteenth round's row of heads averaged signed (the sixteenth's of the heads' pushes half
    cancelled) is MiniLM's own construction against MiniLM's own default (ROUND_ALIASES), not the 12-layer names,
    which have no rows there."""
    default_search = _default_search()
    lead = default_search.ROUND_LEADS[flag][0]
    mpnet_net, minilm_net = getattr(default_search, mpnet[0])[mpnet[1]], getattr(default_search, minilm[0])[minilm[1]]
    assert default_search.ROUND_ALIASES[flag]["minilm"][mpnet_net] == minilm_net
    minilm_lead = default_search.ROUND_ALIASES[flag]["minilm"][lead]
    assert (lead, minilm_lead) == ("ds:pow0.25:pm0.25:gate0.5:rel-0.5:lp", "ds:pow0.5:pm0.25:rel-0.5:lp")
    halves = {"minilm--movie-sentences": [(0, minilm_lead, 0.5, 0.2, 0.1, 0.3), (1, minilm_lead, 0.3, 0.4, 0.2, 0.3),
                                          (0, minilm_net, 0.6, 0.1, 0.2, 0.3), (1, minilm_net, 0.6, 0.1, 0.2, 0.3)],
              "mpnet--tweets": [(0, lead, 0.5, 0.2, 0.1, 0.3), (1, lead, 0.5, 0.2, 0.1, 0.3),
                                (0, mpnet_net, 0.4, 0.3, 0.1, 0.3), (1, mpnet_net, 0.4, 0.3, 0.1, 0.3)]}
    text = _binned_round_table(default_search, flag, tmp_path, monkeypatch, halves)
    header = next(line for line in text.splitlines() if line.startswith("| construction |"))
    assert [c.strip() for c in header.strip("|").split("|")][1:3] == ["minilm--movie-sentences (n=2)",
                                                                      "mpnet--tweets (n=2)"]
    row = next(line for line in text.splitlines() if line.startswith(f"| `{mpnet_net}` |"))
    # MiniLM: comp. +0.1, +0.3; suff. −0.1, −0.3; MPNet: comp. −0.1, −0.1; suff. +0.1, +0.1
    assert [c.strip() for c in row.strip("|").split("|")][1:3] == ["+0.200 ± 0.100 / -0.200 ± 0.100",
                                                                  "-0.100 ± 0.000 / +0.100 ± 0.000"]
    assert not any(line.startswith(f"| `{minilm_net}` |") for line in text.splitlines())


def test_thirteenth_round_joins_the_eleventh_rounds_half_only_where_the_default_agrees(write_results, tmp_path,
                                                                                       monkeypatch):
    """A thirteenth-round tune half takes the eleventh round's constructions of the same half as possible best
    others only where the architecture's default gave the same rows (the same model and examples), never LIG-50;
    held-out runs are left as they are."""
    default_search = _default_search()
    lead, lp = default_search.THIRTEENTH_MINILM
    assert lead == default_search._HUBS_LEADS["minilm"]
    eleventh, fourth = tmp_path / "eleventh", tmp_path / "fourth"
    monkeypatch.setattr(default_search, "ELEVENTH_DIR", eleventh)
    monkeypatch.setattr(default_search, "FOURTH_DIR", fourth)
    monkeypatch.setattr(default_search, "ELEVENTH_JOINS", ())
    cell = default_search.CELLS["minilm--tweets"]
    write_results(eleventh / "tune" / cell.name, [(0, lead, 0.5, 0.1), (1, lead, 0.4, 0.2),
                                                  (0, "ds:pow0.5:pm", 0.7, 0.0), (1, "ds:pow0.5:pm", 0.6, 0.1),
                                                  (0, "ig", 0.9, -0.1), (1, "ig", 0.9, -0.1)])
    write_results(tmp_path / "run" / "tune" / cell.name, [(0, lead, 0.5, 0.1), (1, lead, 0.4, 0.2),
                                                          (0, lp, 0.55, 0.1), (1, lp, 0.45, 0.2)])
    run = tmp_path / "run" / "tune" / cell.name
    values = default_search._read_csv(run / "results.csv")
    default_search._add_eleventh_rows(cell, run, values)
    assert sorted(values["comprehensiveness"]) == sorted([lead, lp, "ds:pow0.5:pm"])  # joined, LIG-50 left out
    assert values["comprehensiveness"]["ds:pow0.5:pm"] == {0: 0.7, 1: 0.6}
    # the default's rows differ by more than the tolerance: another model, nothing joined
    other = tmp_path / "other" / "tune" / cell.name
    write_results(other, [(0, lead, 0.5 + 2 * default_search.SAME_RUN_TOLERANCE, 0.1), (1, lead, 0.4, 0.2)])
    values = default_search._read_csv(other / "results.csv")
    default_search._add_eleventh_rows(cell, other, values)
    assert sorted(values["comprehensiveness"]) == [lead]
    # a held-out run is not joined with tune rows
    held = tmp_path / "run" / "holdout" / cell.name
    write_results(held, [(0, lead, 0.5, 0.1), (1, lead, 0.4, 0.2)])
    values = default_search._read_csv(held / "results.csv")
    default_search._add_eleventh_rows(cell, held, values)
    assert sorted(values["comprehensiveness"]) == [lead]


def test_fourteenth_round_joins_every_earlier_decoder_run_of_a_half_only_where_pr_tag_pm_agrees(write_results, tmp_path,
                                                                                                monkeypatch):
    """A decoder tune half of the fourteenth round takes every earlier decoder round's constructions of the same half
    as possible best others where PR-TAG± gave the same rows (the same model and examples), never LIG-50 and never
    from another model; held-out runs and encoder halves are left as they are, and the rule ranks the two."""
    default_search = _default_search()
    lead, lp = default_search.THIRTEENTH_DECODERS
    third, seventh = tmp_path / "third", tmp_path / "seventh"
    monkeypatch.setattr(default_search, "DECODER_JOINS", (third, seventh))
    cell = default_search.CELLS["smollm2--movie-sentences"]
    write_results(third / "tune" / cell.name, [(0, lead, 0.5, 0.1), (1, lead, 0.4, 0.2),
                                               (0, "ds:pow0.5", 0.3, 0.3), (1, "ds:pow0.5", 0.2, 0.3),
                                               (0, "ig", 0.9, -0.1), (1, "ig", 0.9, -0.1)])
    # the seventh round's PR-TAG± rows are another model's: its construction is not joined
    write_results(seventh / "tune" / cell.name, [(0, lead, 0.5 + 2 * default_search.SAME_RUN_TOLERANCE, 0.1),
                                                 (1, lead, 0.4, 0.2), (0, "ds:pow0.25:pm", 0.9, 0.0),
                                                 (1, "ds:pow0.25:pm", 0.9, 0.0)])
    run = tmp_path / "fourteenth" / "tune" / cell.name
    write_results(run, [(0, lead, 0.5, 0.1), (1, lead, 0.4, 0.2), (0, lp, 0.6, 0.1), (1, lp, 0.5, 0.1)])
    values = default_search._read_csv(run / "results.csv")
    default_search._add_decoder_rows(cell, run, values)
    assert sorted(values["comprehensiveness"]) == sorted([lead, lp, "ds:pow0.5"])
    assert values["comprehensiveness"]["ds:pow0.5"] == {0: 0.3, 1: 0.2}
    # the rule over this half: the log-probability beats every other (a negative worst case), PR-TAG± loses to it
    monkeypatch.setattr(default_search, "_round_runs",
                        lambda folder, lead=None: iter([(cell, default_search._read_csv(run / "results.csv"),
                                                         None, None)]))
    losses, cells = default_search._rule_losses([tmp_path / "fourteenth"], [lead, lp],
                                                augment=default_search._add_decoder_rows)
    assert [c.name for c in cells] == [cell.name]
    worst = {m: max(found, key=lambda x: x[0]) for m, found in losses.items()}
    assert worst[lead][0] == pytest.approx(0.1) and worst[lead][4] == lp and worst[lead][3] == "comprehensiveness"
    assert worst[lp][0] < 0
    # a held-out run, and an encoder half, are not joined
    for other_cell, half in ((cell, "holdout"), (default_search.CELLS["minilm--tweets"], "tune")):
        held = tmp_path / half / half / other_cell.name
        write_results(held, [(0, lead, 0.5, 0.1), (1, lead, 0.4, 0.2)])
        values = default_search._read_csv(held / "results.csv")
        default_search._add_decoder_rows(other_cell, held, values)
        assert sorted(values["comprehensiveness"]) == [lead]


def test_fourteenth_round_reads_its_held_out_halves_from_the_matrixs_decoder_cells(write_results, tmp_path,
                                                                                   monkeypatch):
    """The decoders' held-out check is the matrix's own rows: PR-TAG± on the log-probability against PR-TAG± and
    against LIG-50, paired per example; a cell without the log-probability's rows is left out."""
    default_search = _default_search()
    monkeypatch.setattr(default_search, "MATRIX_DIR", tmp_path)
    write_results(tmp_path / "smollm2--tweets", [(0, "pr-tag-pm", 0.2, 0.3), (1, "pr-tag-pm", 0.4, 0.1),
                                                 (0, "pr-tag-pm-lp", 0.3, 0.2), (1, "pr-tag-pm-lp", 0.5, 0.1),
                                                 (0, "ig", 0.1, 0.1), (1, "ig", 0.1, 0.1)])
    write_results(tmp_path / "smollm2--uncertainty", [(0, "pr-tag-pm", 0.2, 0.3), (0, "ig", 0.1, 0.1)])
    write_results(tmp_path / "minilm--tweets", [(0, "pr-tag-pm", 0.2, 0.3), (0, "pr-tag-pm-lp", 0.9, 0.0)])
    lines = default_search._fourteenth_held_out_lines([], tmp_path)
    rows = [line for line in lines if line.startswith("| smollm2") or line.startswith("| minilm")]
    assert rows == ["| smollm2--tweets | 2 | +0.100 ± 0.000 / -0.050 ± 0.050 | +0.200 ± 0.100 / +0.100 ± 0.100 "
                    "| +0.300 ± 0.100 / +0.050 ± 0.050 |"]


def test_held_out_tables_pair_the_matrix_on_the_runs_examples_without_pr_g(write_results, tmp_path, monkeypatch):
    """A held-out side run that did not run ``ds:g`` (e.g. the thirteenth round's decoder run) still takes the
    matrix's methods on its own examples, so its tables are written (they were empty before: a division by zero)."""
    default_search = _default_search()
    matrix_dir = tmp_path / "matrix"
    monkeypatch.setattr(default_search, "MATRIX_DIR", matrix_dir)
    cell = default_search.CELLS["smollm2--tweets"]
    probs = {0: 0.9, 1: 0.8, 5: 0.7}
    write_results(matrix_dir / cell.name, [(0, "gae", 0.1, 0.3), (1, "gae", 0.2, 0.3), (5, "gae", 0.9, 0.0)],
                  probs)
    run = tmp_path / "run"
    write_results(run, [(0, "ds:pow0.5:pm", 0.3, 0.2), (1, "ds:pow0.5:pm", 0.4, 0.1),
                        (0, "ds:pow0.5:lp:pm", 0.4, 0.2), (1, "ds:pow0.5:lp:pm", 0.4, 0.1)], probs)
    values = default_search._read_csv(run / "results.csv")
    default_search._merge_matrix(cell, values, run / "results.csv")
    assert values["comprehensiveness"]["matrix:gae"] == {0: 0.1, 1: 0.2}  # only the run's examples
    # a run of another model (the matrix cell was rerun on a retrained one): the matrix's rows are not paired with it
    other = tmp_path / "other"
    write_results(other, [(0, "ds:pow0.5:pm", 0.3, 0.2), (1, "ds:pow0.5:pm", 0.4, 0.1)], {0: 0.9, 1: 0.7})
    values = default_search._read_csv(other / "results.csv")
    assert default_search._merge_matrix(cell, values, other / "results.csv") is None
    assert sorted(values["comprehensiveness"]) == ["ds:pow0.5:pm"]
