"""Attention-sink handling for decoders, measured on a toy task with a known answer.

A tiny Llama classifier is trained so that one inserted sentiment word decides the label; a faithful
attribution ranks that word first. Compares PR-AG with the sink and self-loop options.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
import transformers as tf

import captum_prxai

torch.set_num_threads(1)
torch.manual_seed(0)
random.seed(0)

POSITIVE = ["good", "great", "superb", "moving", "funny"]
NEGATIVE = ["bad", "awful", "boring", "dull", "clumsy"]
FILLER = ("the film a story its cast plot with and of to was is this that an actors score pace "
          "ending scenes director script camera music it felt rather quite very").split()
VOCAB = ["[PAD]", "[CLS]"] + FILLER + POSITIVE + NEGATIVE
ID = {w: i for i, w in enumerate(VOCAB)}

def make_example(rng):
    n = rng.randint(5, 11)
    words = [rng.choice(FILLER) for _ in range(n)]
    label = rng.randint(0, 1)
    words.insert(rng.randint(0, n), rng.choice(POSITIVE if label else NEGATIVE))
    return " ".join(words), label

def encode(texts, cls_first=True, pad_left=False):
    rows = [([ID["[CLS]"]] if cls_first else []) + [ID[w] for w in t.split()] for t in texts]
    width = max(map(len, rows))
    ids = torch.zeros(len(rows), width, dtype=torch.long); mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        sl = slice(width - len(r), width) if pad_left else slice(0, len(r))
        ids[i, sl] = torch.tensor(r); mask[i, sl] = 1
    return ids, mask

def train(model, steps, batch=64, lr=3e-3, **enc_kwargs):
    rng = random.Random(1)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for step in range(steps):
        texts, labels = zip(*(make_example(rng) for _ in range(batch)))
        ids, mask = encode(texts, **enc_kwargs)
        loss = F.cross_entropy(model(ids, mask), torch.tensor(labels))
        opt.zero_grad(); loss.backward(); opt.step()
    model.eval()
    texts, labels = zip(*(make_example(random.Random(2)) for _ in range(500)))
    ids, mask = encode(texts, **enc_kwargs)
    with torch.no_grad():
        acc = (model(ids, mask).argmax(-1) == torch.tensor(labels)).float().mean().item()
    return acc

torch.set_num_threads(1)
cfg = tf.LlamaConfig(vocab_size=len(VOCAB), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64, num_labels=2, pad_token_id=0)
torch.manual_seed(0)
dec = tf.LlamaForSequenceClassification(cfg)
def dfwd(i, m): return dec(input_ids=i, attention_mask=m).logits
class W(nn.Module):
    def __init__(s, m): super().__init__(); s.m=m
    def forward(s, i, m): return s.m(input_ids=i, attention_mask=m).logits
acc = train(W(dec), 300, cls_first=False)
rng = random.Random(5)
exs = [make_example(rng) for _ in range(100)]
texts = [t for t,_ in exs]
ids, mask = encode(texts, cls_first=False)
ans = torch.tensor([[ (w in POSITIVE or w in NEGATIVE) for w in t.split()] + [False]*(ids.shape[1]-len(t.split())) for t in texts])
def hit(scores):
    s = scores.clone()
    last = mask.sum(-1)-1
    s[torch.arange(len(s)), last] = -1e9   # exclude the explained token
    return (ans[torch.arange(len(s)), s.argmax(-1)]).float().mean().item()

rows = []
for label, kwargs in [("sink and self-loops kept", dict(sink="keep", self_loops="keep")),
                      ("sink dropped, self-loops kept", dict(sink="drop", self_loops="keep")),
                      ("sink and self-loops dropped (default)", dict()),
                      ("sink and self-loops kept, damping 0.5", dict(sink="keep", self_loops="keep", damping=0.5)),
                      ("sink and self-loops dropped, damping 0.5", dict(damping=0.5))]:
    s = captum_prxai.PRAttentionGradient(dfwd, captum_prxai.attention_layers(dec), damping=kwargs.pop("damping", 0.7),
                                         **kwargs).attribute(ids, additional_forward_args=(mask,))
    rows.append((f"PR-AG, {label}", hit(s)))
layers = captum_prxai.attention_layers(dec)
rows.append(("GAE", hit(captum_prxai.GradientWeightedRollout(dfwd, layers).attribute(ids, additional_forward_args=(mask,)))))
rows.append(("rollout", hit(captum_prxai.AttentionRollout(dfwd, layers).attribute(ids, additional_forward_args=(mask,)))))
print("# Attention sinks on a trained toy decoder")
print()
print("Reproduce: `python benchmarks/decoder_sink_toy.py > benchmarks/results/decoder_sink_toy.md`")
print()
print(f"A 2-layer Llama classifier trained on a toy task whose label is set by one sentiment word (accuracy {acc:.2f});")
print("100 fresh examples. Hit rate: how often the top-scored token (the explained last token excluded) is that word.")
print()
print("| method | hit rate |")
print("|---|---|")
for name, value in rows:
    print(f"| {name} | {value:.2f} |")
