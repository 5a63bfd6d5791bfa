"""The matrix script (benchmarks/matrix.py): its cells' defaults and the command it writes."""


def test_matrix_finished_writes_the_command_that_computes_what_it_summarised(benchmark_script):
    matrix = benchmark_script("matrix.py")
    assert matrix._with_n(["--cell", "c", "--extend", "--n", "100"], 37) == ["--cell", "c", "--extend", "--n", "37"]
    assert matrix._with_n(["--cell", "c", "--n=100", "--threads", "1"], 5) == ["--cell", "c", "--threads", "1", "--n",
                                                                               "5"]
    assert matrix._with_n(["--cell", "c"], 200) == ["--cell", "c", "--n", "200"]


def test_matrix_cells_name_the_default_by_depth_and_show_the_former_one_only_where_it_has_no_rows(tmp_path, monkeypatch,
                                                                                                  write_results):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        import matrix
    finally:
        sys.path.pop(0)
    cells = matrix.CELLS
    assert cells["minilm--tweets"].default == "pr-tag-pm0.25-hubs0.5-lp-cp-rel"  # 6 layers
    assert cells["mpnet--tweets"].default == "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp-cp-rel"  # 12 layers
    assert cells["smollm2--tweets"].default == "pr-tag-pm-lp"  # a decoder: λ = 1, γ = 0.5, no hubs
    assert all(c.default in c.methods.split(",") for c in cells.values())
    monkeypatch.setattr(matrix, "MATRIX_DIR", tmp_path)
    cell = cells["mpnet--tweets"]
    write_results(tmp_path / cell.name, [(0, "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp", 0.5, 0.1),
                                         (0, "gae", 0.4, 0.2)])
    assert cell.shown_default() == ("pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp", "former default")
    (tmp_path / cell.name / "results.csv").unlink()
    (tmp_path / cell.name).rmdir()
    write_results(tmp_path / cell.name, [(0, "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp", 0.5, 0.1),
                                         (0, "pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp-cp-rel", 0.6, 0.1)])
    assert cell.shown_default() == ("pr-tag0.25-pm0.25-gate0.5-hubs0.5-lp-cp-rel", "")
    # a decoder cell without rows of PR-TAG± (log-prob.) shows PR-TAG±, said to be the former default
    cell = cells["smollm2--tweets"]
    write_results(tmp_path / cell.name, [(0, "pr-tag-pm", 0.5, 0.1), (0, "gae", 0.4, 0.2)])
    assert cell.shown_default() == ("pr-tag-pm", "former default")
