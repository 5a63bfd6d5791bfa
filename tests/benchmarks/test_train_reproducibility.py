"""The training-reproducibility script (benchmarks/train_reproducibility.py): its tables."""

import torch


def test_train_reproducibility_tables_compare_runs_and_cpus(benchmark_script):
    script = benchmark_script("train_reproducibility.py")
    a = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor([0.5])}
    b = {"w": torch.tensor([1.0, 2.25]), "b": torch.tensor([0.5])}
    cpu = {"capability": "AVX512", "processor": "CPU one"}
    records = [{"name": "native", "state": a, "fingerprint": script._fingerprint(a), "cpu": cpu},
               {"name": "pinned", "state": b, "fingerprint": script._fingerprint(b), "cpu": {**cpu, "capability": "AVX2"}}]
    assert script._fingerprint(a) != script._fingerprint(b)
    assert script._fingerprint({"b": a["b"], "w": a["w"].clone()}) == script._fingerprint(a)  # order and copies
    rows = [r for r in script.run_table(records, 40, "2.13.0") if r.startswith("| native") or r.startswith("| pinned")]
    assert rows[0].startswith("| native | AVX512 | 0 | 0.25 |") and rows[1].startswith("| pinned | AVX2 | 0.25 | 0 |")

    base = {"date": "d", "native_capability": "AVX512", "torch": "2.13.0", "steps": 40, "native": "n" * 64}
    history = [{**base, "processor": "CPU one", "pinned": "p" * 64},
               {**base, "processor": "CPU one", "pinned": "p" * 64},
               {**base, "processor": "CPU two", "pinned": "p" * 64},
               {**base, "processor": "CPU three", "pinned": "q" * 64},
               {**base, "processor": "CPU four", "pinned": "q" * 64, "steps": 80}]
    verdicts = [line.rsplit("|", 2)[1].strip() for line in script.history_table(history) if line.startswith("| d |")]
    assert verdicts == ["same", "same", "same", "differs from CPU one", "no other CPU yet"]
