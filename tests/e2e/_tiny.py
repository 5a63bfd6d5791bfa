"""A tiny BERT classifier, WordPiece tokenizer and in-memory dataset for the explorer tests."""

from __future__ import annotations

from pathlib import Path

WORDS = ["a", "good", "bad", "film", "movie", "great", "dull", "plot", "the", "was", "play", "##ing", "not",
         "boring", "fun", "story", "acting", "<", ">", "script", "alert", "(", ")", "1", "/", "!", ",", ".",
         "and", "but", "very", "it"]

TEXTS = [
    ("a good film", 1), ("a bad film", 0), ("the plot was dull", 0), ("great acting and fun story", 1),
    ("the movie was boring", 0), ("very good movie", 1), ("not fun", 0), ("it was great", 1),
    ("bad acting but good plot", 1), ("dull and boring script", 0), ("the story was not good", 0),
    ("fun fun fun", 1), ("a playing film", 1), ("the film was very bad", 0),
]

MAX_TOKENS = 24
TRAIN_STEPS = 40


def build_tiny(tmp_path: Path):
    """``(model, tokenizer, datasets)``: 2-layer BERT, WordPiece vocab file in ``tmp_path``, 2 datasets."""
    import torch
    import transformers

    from captum_prxai.data import TextDataset

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = transformers.BertTokenizerFast(vocab=str(vocab_file), do_lower_case=True,
                                               model_max_length=MAX_TOKENS)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=MAX_TOKENS, num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, id2label={0: "negative", 1: "positive"},
        label2id={"negative": 0, "positive": 1}, attn_implementation="eager",
    )
    model = transformers.BertForSequenceClassification(config)
    # a few optimizer steps on half of the texts, so that both classes are predicted and some texts are
    # misclassified (the filters need both); deterministic under the seed
    train = TEXTS[::2]
    enc = tokenizer([t for t, _ in train], padding=True, return_tensors="pt")
    labels = torch.tensor([lab for _, lab in train])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(TRAIN_STEPS):
        opt.zero_grad()
        model(**enc, labels=labels).loss.backward()
        opt.step()
    model.eval()
    reviews = TextDataset("tiny-reviews", "test", [t for t, _ in TEXTS], [lab for _, lab in TEXTS],
                          ["negative", "positive"])
    topics = TextDataset("tiny-topics", "test", ["a film", "the plot", "a story"], [0, 1, 2],
                         ["film", "plot", "story"])
    return model, tokenizer, {"tiny-reviews": reviews, "tiny-topics": topics}
