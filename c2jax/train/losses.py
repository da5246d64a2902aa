"""The training objective: masked next-token cross-entropy, MTP losses, optional z-loss.

    objective = CE + mtp_weight / D * sum_k CE_k + z_loss_weight * Z + aux_loss

- CE: mean over the tokens with `loss_mask` 1 of -log p(targets). Pretraining masks only
  padding; SFT uses the chat template's mask (assistant tokens only), with the same code.
- CE_k (k = 1..D, DeepSeek-V3 eq. 24-25): MTP module k at position i predicts the token k
  steps beyond `targets[i]`, i.e. `targets[i + k]`, counted only when position i + k is in
  the same document and that target is itself trained on (its `loss_mask`).
- Z: mean of logsumexp(logits)^2 over the same tokens (PaLM's z-loss), keeps the softmax
  normaliser near 1 so bf16 logits stay in range.
- aux_loss: the model's sequence-wise balance loss, already weighted (0 unless enabled).

Batches are dicts of `[batch, seq]` arrays as `c2jax.data.pipeline` yields them: `tokens`,
`targets`, `loss_mask`, `segment_ids`, `positions`.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from c2jax.model import apply
from c2jax.model.mtp import shift_within_segment


def token_losses(logits, targets):
    """Per-token cross-entropy and logsumexp: logits float32 `[b, s, vocab]`, targets int
    `[b, s]` -> (ce `[b, s]`, lse `[b, s]`), sharing one logsumexp."""
    logits = logits.astype(jnp.float32)
    lse = jax.nn.logsumexp(logits, axis=-1)
    target_logits = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return lse - target_logits, lse


def masked_sum_and_count(values, mask):
    """(sum of `values` where mask, number of such tokens): both float32 scalars."""
    mask = mask.astype(jnp.float32)
    return jnp.sum(values * mask), jnp.sum(mask)


def mtp_targets(batch, depth: int):
    """Targets of MTP module `depth` (1-based) and their mask, int / float32 `[b, s]`.

    Module `depth` predicts `targets[i + depth]`; valid when i + depth is in the same document
    (segment) and that target is trained on.
    """
    targets, _ = shift_within_segment(batch["targets"], batch["segment_ids"], depth)
    mask, _ = shift_within_segment(batch["loss_mask"], batch["segment_ids"], depth)
    return targets, mask


def forward_losses(params, router_bias, batch, model_cfg):
    """Runs the model and returns per-term (sum, count) pairs, the per-token CE, and aux.

    Returns (terms, ce, aux): terms maps "ce", "z" and "mtp_1".."mtp_D" to (sum, count) float32
    scalars, so a caller can average within a batch (training) or across batches (eval); ce is
    the next-token cross-entropy float32 `[b, s]` (unmasked); aux is the model's aux dict.

    With `head_positions` / `head_valid` `[b, n]` in the batch (`c2jax.train.head_positions`)
    the head runs at those positions only, every target and mask is gathered there, and ce is
    `[b, n]`: the same terms when the positions cover every trained one.
    """
    at = batch.get("head_positions")
    logits, aux = apply({"params": params, "router_bias": router_bias}, batch["tokens"],
                        batch["segment_ids"], batch["positions"], cfg=model_cfg, logits_at=at)

    def gathered(targets, mask):
        if at is None:
            return targets, mask
        return (jnp.take_along_axis(targets, at, axis=1),
                jnp.take_along_axis(mask, at, axis=1) * batch["head_valid"])

    targets, mask = gathered(batch["targets"], batch["loss_mask"])
    ce, lse = token_losses(logits, targets)
    terms = {"ce": masked_sum_and_count(ce, mask),
             "z": masked_sum_and_count(jnp.square(lse), mask)}
    for depth in range(1, model_cfg.num_mtp_layers + 1):
        targets, mask = gathered(*mtp_targets(batch, depth))
        mtp_ce, _ = token_losses(aux["mtp_logits"][depth - 1], targets)
        terms[f"mtp_{depth}"] = masked_sum_and_count(mtp_ce, mask)
    return terms, ce, aux


def mean_of(term):
    """sum / count of a (sum, count) pair; 0 when no token was counted."""
    total, count = term
    return total / jnp.maximum(count, 1.0)


def training_objective(params, router_bias, batch, model_cfg, loss_cfg):
    """The scalar that is differentiated, and (losses, aux).

    losses: "loss" (next-token CE), "mtp_loss_k", "z_loss", "aux_loss", "objective", and
    "loss_tokens" (tokens the CE averaged over); aux: the model's aux dict.
    """
    terms, _, aux = forward_losses(params, router_bias, batch, model_cfg)
    losses = {"loss": mean_of(terms["ce"]), "z_loss": mean_of(terms["z"]),
              "loss_tokens": terms["ce"][1]}
    objective = losses["loss"] + loss_cfg.z_loss_weight * losses["z_loss"]
    depth = model_cfg.num_mtp_layers
    for k in range(1, depth + 1):
        losses[f"mtp_loss_{k}"] = mean_of(terms[f"mtp_{k}"])
        objective = objective + loss_cfg.mtp_weight / depth * losses[f"mtp_loss_{k}"]
    losses["aux_loss"] = aux.get("aux_loss", jnp.zeros((), jnp.float32))
    objective = objective + losses["aux_loss"]
    losses["objective"] = objective
    return objective, (losses, aux)
