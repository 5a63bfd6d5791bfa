"""The README's Python snippets run as written (with the embedded default model)."""

import re
from pathlib import Path

import torch

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_usage_snippet_runs_and_returns_token_scores():
    blocks = [b for b in _python_blocks() if "PRAttentionGradient(forward, attention_layers(model))" in b]
    assert blocks, "the README lost its usage snippet"
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    scores, ids = namespace["scores"], namespace["input_ids"]
    assert scores.shape == ids.shape and scores.dtype == torch.float32
    assert torch.allclose(scores.sum(-1), torch.ones(ids.shape[0]), atol=1e-5)
