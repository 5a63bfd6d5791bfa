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

The same rule code patched onto BERT instead (``patch_bert_like_mpnet``) must give lxt's own BERT scores:
``check_rules_on_bert.sh <MiniLM cell>`` scores that cell's export with ``attnlrp_scores.py --rules ours``
and compares the scores with lxt's committed ones (``benchmarks/results/attnlrp-mpnet-rules-check.md``).
"""
import math
from typing import List

import torch
from torch import nn


def _lrp_attention(q, k, v, sqrt_d: float, additive=(), dropout=None, head_mask=None):
    """``softmax(q kᵀ / sqrt_d + additive) v`` per head with the AttnLRP rules: the uniform rule on both bilinear
    products (``divide_gradient(., 2)``), the softmax's own gradient. Returns ``(context, probs)``, ``(B, H, T, D)``."""
    from lxt.efficient.rules import divide_gradient

    scores = divide_gradient(torch.matmul(q, k.transpose(-1, -2)), 2) / sqrt_d
    for term in additive:  # position bias, padding mask: constants of the input
        if term is not None:
            scores = scores + term
    probs = nn.functional.softmax(scores, dim=-1)
    if dropout is not None:
        probs = dropout(probs)
    if head_mask is not None:
        probs = probs * head_mask
    return divide_gradient(torch.matmul(probs, v), 2), probs


def _merge_heads(context, all_head_size: int):
    context = context.permute(0, 2, 1, 3).contiguous()
    return context.view(*context.size()[:-2], all_head_size)


def _intermediate_forward(self, hidden_states):
    """Feed-forward ``act(dense(x))`` with the identity rule on the activation."""
    from lxt.efficient.rules import identity_rule_implicit

    return identity_rule_implicit(self.intermediate_act_fn, self.dense(hidden_states))


def _patch(table) -> List[str]:
    from lxt.efficient.patches import dropout_forward, layer_norm_forward, patch_method

    patched = []
    for cls, fn in ((nn.LayerNorm, layer_norm_forward), (nn.Dropout, dropout_forward)) + tuple(table):
        if patch_method(fn, cls):
            patched.append(cls.__name__)
    return patched


def patch_mpnet(modeling_mpnet) -> List[str]:
    """Patch ``modeling_mpnet``'s classes with the AttnLRP rules; returns what was patched."""
    from lxt.efficient.rules import identity_rule_implicit

    def self_attention_forward(self, hidden_states, attention_mask=None, head_mask=None, position_bias=None,
                               output_attentions=False, **kwargs):
        q, k, v = (self.transpose_for_scores(f(hidden_states)) for f in (self.q, self.k, self.v))
        c, probs = _lrp_attention(q, k, v, math.sqrt(self.attention_head_size),
                                  (position_bias, attention_mask), self.dropout, head_mask)
        o = self.o(_merge_heads(c, self.all_head_size))
        return (o, probs) if output_attentions else (o,)

    def head_forward(self, features, **kwargs):
        x = self.dropout(features[:, 0, :])
        x = identity_rule_implicit(torch.tanh, self.dense(x))
        return self.out_proj(self.dropout(x))

    return _patch(((modeling_mpnet.MPNetSelfAttention, self_attention_forward),
                   (modeling_mpnet.MPNetIntermediate, _intermediate_forward),
                   (modeling_mpnet.MPNetClassificationHead, head_forward)))


def patch_bert_like_mpnet(modeling_bert) -> List[str]:
    """The same rule code on transformers 4.x BERT (eager attention, encoder only): a check of this file against
    lxt's own BERT rules, not for use in place of them."""
    from lxt.efficient.rules import identity_rule_implicit

    def self_attention_forward(self, hidden_states, attention_mask=None, head_mask=None, encoder_hidden_states=None,
                               encoder_attention_mask=None, past_key_value=None, output_attentions=False):
        if encoder_hidden_states is not None or past_key_value is not None or self.is_decoder:
            raise NotImplementedError("the check covers encoder self-attention only")
        if self.position_embedding_type != "absolute":
            raise NotImplementedError("the check covers absolute position embeddings only")
        q, k, v = (self.transpose_for_scores(f(hidden_states)) for f in (self.query, self.key, self.value))
        c, probs = _lrp_attention(q, k, v, math.sqrt(self.attention_head_size), (attention_mask,),
                                  self.dropout, head_mask)
        c = _merge_heads(c, self.all_head_size)
        return (c, probs) if output_attentions else (c,)

    def pooler_forward(self, hidden_states):
        return identity_rule_implicit(self.activation, self.dense(hidden_states[:, 0]))

    return _patch(((modeling_bert.BertSelfAttention, self_attention_forward),
                   (modeling_bert.BertIntermediate, _intermediate_forward),
                   (modeling_bert.BertPooler, pooler_forward)))
