"""benchmarks/llm_long.py: measurements add up across runs in its JSON Lines store."""

from __future__ import annotations

import json


def test_the_table_keeps_the_latest_measurement_of_each_method_and_length(benchmark_script, tmp_path):
    long = benchmark_script("llm_long.py")
    store = tmp_path / "long.jsonl"
    rows = [{"method": "PR-G", "prompt_tokens": 2048, "cpu_s": 1.0, "command": "first"},
            {"method": "PR-A", "prompt_tokens": 4096, "cpu_s": 2.0, "command": "first"},
            {"method": "PR-G", "prompt_tokens": 2048, "cpu_s": 3.0, "command": "second"},
            {"method": "PR-A", "prompt_tokens": 1024, "cpu_s": 4.0, "command": "second"}]
    store.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    read = long._read_rows(store)
    assert [(r["method"], r["prompt_tokens"], r["cpu_s"]) for r in read] == [
        ("PR-A", 1024, 4.0), ("PR-A", 4096, 2.0), ("PR-G", 2048, 3.0)]
    assert long._read_rows(tmp_path / "missing.jsonl") == []
