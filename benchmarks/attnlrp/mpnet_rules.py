"""AttnLRP rules for transformers 4.x ``modeling_mpnet``, which lxt 2.1 does not cover.

Runs in the lxt venv only (imported by ``attnlrp_scores.py`` for ``model_type == "mpnet"``). lxt's
efficient AttnLRP (Achtibat et al., ICML 2024, https://arxiv.org/abs/2402.05602) is Gradient x Input
on a model whose backward pass is changed at four kinds of operation; lxt's own BERT file applies them
to ``modeling_bert``. Here the same rules, from ``lxt.efficient.rules`` and ``lxt.efficient.patches``,
are applied to MPNet's modules:

* LayerNorm (embeddings and every layer): the identity rule, the gradient stopped through the standard
  deviation (``lxt.efficient.patches.layer_norm_forward``, as lxt patches BERT's).
* Self-attention: the uniform rule on both bilinear products, ``divide_gradient(., 2)`` after
  ``q kᵀ`` and after ``A v``, as lxt's BERT attention; the softmax keeps its gradient (its AttnLRP rule
  is Gradient x Input with the bias term). MPNet's relative position bias is added to the scores: a
  constant of the input, it absorbs relevance as a bias does.
* The feed-forward activation (GELU) and the classification head's tanh: the identity rule
  (``identity_rule_implicit``), as lxt's BERT intermediate and pooler.
* Dropout: lxt's ``dropout_forward`` (a no-op in eval mode, as for BERT).

Everything else (linear layers, residual sums, the position and word embeddings) keeps its gradient.
``patch_mpnet(modeling_mpnet)`` replaces the forward methods in place and returns the names patched.
"""
import math
from typing import List

import torch
from torch import nn


def patch_mpnet(modeling_mpnet) -> List[str]:
    """Patch ``modeling_mpnet``'s classes with the AttnLRP rules; returns what was patched."""
    from lxt.efficient.patches import dropout_forward, layer_norm_forward, patch_method
    from lxt.efficient.rules import divide_gradient, identity_rule_implicit

    def self_attention_forward(self, hidden_states, attention_mask=None, head_mask=None, position_bias=None,
                               output_attentions=False, **kwargs):
        q = self.transpose_for_scores(self.q(hidden_states))
        k = self.transpose_for_scores(self.k(hidden_states))
        v = self.transpose_for_scores(self.v(hidden_states))
        scores = divide_gradient(torch.matmul(q, k.transpose(-1, -2)), 2)  # uniform rule on q kᵀ
        scores = scores / math.sqrt(self.attention_head_size)
        if position_bias is not None:
            scores = scores + position_bias
        if attention_mask is not None:
            scores = scores + attention_mask
        probs = self.dropout(nn.functional.softmax(scores, dim=-1))
        if head_mask is not None:
            probs = probs * head_mask
        c = divide_gradient(torch.matmul(probs, v), 2)  # uniform rule on A v
        c = c.permute(0, 2, 1, 3).contiguous()
        c = c.view(*c.size()[:-2], self.all_head_size)
        o = self.o(c)
        return (o, probs) if output_attentions else (o,)

    def intermediate_forward(self, hidden_states):
        return identity_rule_implicit(self.intermediate_act_fn, self.dense(hidden_states))

    def head_forward(self, features, **kwargs):
        x = self.dropout(features[:, 0, :])
        x = identity_rule_implicit(torch.tanh, self.dense(x))
        return self.out_proj(self.dropout(x))

    patched = []
    for cls, fn in ((nn.LayerNorm, layer_norm_forward), (nn.Dropout, dropout_forward),
                    (modeling_mpnet.MPNetSelfAttention, self_attention_forward),
                    (modeling_mpnet.MPNetIntermediate, intermediate_forward),
                    (modeling_mpnet.MPNetClassificationHead, head_forward)):
        if patch_method(fn, cls):
            patched.append(cls.__name__)
    return patched
