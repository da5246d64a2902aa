"""Policy-gradient losses for asynchronous RL on token-in/token-out trajectories.

Notation (per token t of sequence i): mu = behaviour policy (the actor's weights when the token
was sampled; its log-prob is recorded), pi_prox = proximal policy (the learner's weights at the
start of this step, no gradient), pi = current policy (with gradient), A_i = advantage,
m_t = loss mask (1 on model-produced tokens, 0 on prompts and tool outputs).

  rho_t = pi_prox / mu        off-policy correction: truncated (TIS, w_t = min(rho_t, C)) and,
                              per sequence, the geometric mean exp(mean_t log rho_t) outside
                              [seq_mask_low, seq_mask_high] masks the whole sequence
  r_t   = pi / pi_prox        the PPO ratio, clipped asymmetrically to [1 - eps_low, 1 + eps_high]

Loss kinds (`loss_config().kind`):
  ppo    decoupled PPO (AReaL, arXiv 2505.24298): w_t * max(-A r_t, -A clip(r_t))
  gspo   sequence ratio s_i = exp(mean_t m log r_t) clipped (Qwen GSPO, arXiv 2507.18071), applied
         token-wise as sg(s_i) * pi / sg(pi) so every token gets the sequence's weight
  cispo  -w_t * sg(clip(r_t)) * A * log pi (MiniMax-M1): no token loses its gradient to clipping

Normalisation is length-unbiased (Dr.GRPO, arXiv 2503.20783): the token sum is divided by a
constant (`num_sequences * max_tokens`), never by a sequence's own length, so a token's gradient
weight does not depend on how long its sequence is. Advantages use the group mean as baseline
without std normalisation (Dr.GRPO), or leave-one-out (RLOO).

Shapes: logp / behaviour_logp / proximal_logp / reference_logp float32 `[seqs, tokens]`,
advantages float32 `[seqs]`, loss_mask float32 `[seqs, tokens]`.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections

LOSS_KINDS = ("ppo", "gspo", "cispo")
ADVANTAGE_KINDS = ("mean", "rloo")


def loss_config(**overrides) -> ml_collections.ConfigDict:
    """Every knob of the RL loss with its default (locked: a misspelt field raises)."""
    c = ml_collections.ConfigDict()
    c.kind = "ppo"              # "ppo" (decoupled PPO) | "gspo" | "cispo"
    c.advantage = "mean"        # "mean" (Dr.GRPO group-mean baseline) | "rloo" (leave-one-out)
    c.eps_low = 0.2             # clip r below at 1 - eps_low
    c.eps_high = 0.28           # clip r above at 1 + eps_high (asymmetric, DAPO)
    c.tis_cap = 2.0             # truncated importance weight cap C on pi_prox / mu
    c.seq_mask_low = 0.5        # sequences whose geometric-mean rho falls outside
    c.seq_mask_high = 2.0       #   [low, high] are masked out entirely
    c.kl_coef = 0.0             # weight of the k3 KL to a reference policy (0 = off)
    c.max_tokens = 0            # normaliser per sequence; 0 = the batch's token axis length
    c.lock()
    c.update(overrides)
    return c


def validate_loss_config(cfg) -> None:
    if cfg.kind not in LOSS_KINDS:
        raise ValueError(f"loss config field 'kind' = {cfg.kind!r}: choose one of {LOSS_KINDS}")
    if cfg.advantage not in ADVANTAGE_KINDS:
        raise ValueError(f"loss config field 'advantage' = {cfg.advantage!r}: choose one of "
                         f"{ADVANTAGE_KINDS}")
    for field in ("eps_low", "eps_high", "kl_coef", "max_tokens"):
        if cfg[field] < 0:
            raise ValueError(f"loss config field '{field}' = {cfg[field]!r} must be >= 0")
    if cfg.tis_cap <= 0 or not 0 < cfg.seq_mask_low <= 1 <= cfg.seq_mask_high:
        raise ValueError("loss config needs tis_cap > 0 and seq_mask_low <= 1 <= seq_mask_high")


def group_advantages(rewards: jax.Array, kind: str = "mean") -> jax.Array:
    """Advantages of `rewards` `[groups, samples]` against their group.

    "mean": A = r - mean_g(r) (no std division: Dr.GRPO). "rloo": A = r - mean of the *other*
    samples = n/(n-1) (r - mean_g). A group of one sample gets advantage 0.
    """
    n = rewards.shape[-1]
    centred = rewards - jnp.mean(rewards, axis=-1, keepdims=True)
    if kind == "mean" or n == 1:
        return centred if n > 1 else jnp.zeros_like(rewards)
    if kind == "rloo":
        return centred * n / (n - 1)
    raise ValueError(f"unknown advantage kind {kind!r}; choose one of {ADVANTAGE_KINDS}")


def policy_loss(logp, behaviour_logp, proximal_logp, advantages, loss_mask, cfg,
                reference_logp=None, normaliser=None):
    """The configured policy-gradient loss and its diagnostics.

    Returns (loss scalar, metrics dict of scalars). `proximal_logp` None means on-policy
    learner (pi_prox = current weights, detached): then r_t = 1 in value and the loss reduces
    to truncated-IS REINFORCE. `normaliser`: the constant the token sum is divided by; default
    `seqs * (max_tokens or tokens)` of this call (pass the whole batch's when the batch is
    split into microbatches, so every token keeps the same weight).
    """
    mask = loss_mask.astype(jnp.float32)
    seqs, tokens = logp.shape
    if proximal_logp is None:
        proximal_logp = jax.lax.stop_gradient(logp)
    proximal_logp = jax.lax.stop_gradient(proximal_logp)
    behaviour_logp = jax.lax.stop_gradient(behaviour_logp)
    adv = jax.lax.stop_gradient(advantages.astype(jnp.float32))[:, None]

    # Off-policy correction between the actor that sampled and the proximal policy.
    log_rho = (proximal_logp - behaviour_logp) * mask
    token_count = jnp.maximum(jnp.sum(mask, axis=1), 1.0)
    seq_log_rho = jnp.sum(log_rho, axis=1) / token_count                         # [seqs]
    seq_keep = ((seq_log_rho >= jnp.log(cfg.seq_mask_low))
                & (seq_log_rho <= jnp.log(cfg.seq_mask_high))).astype(jnp.float32)
    tis = jnp.minimum(jnp.exp(log_rho), cfg.tis_cap)
    keep = mask * seq_keep[:, None]

    log_ratio = (logp - proximal_logp) * mask
    ratio = jnp.exp(log_ratio)
    low, high = 1.0 - cfg.eps_low, 1.0 + cfg.eps_high
    if cfg.kind == "ppo":
        per_token = tis * jnp.maximum(-adv * ratio, -adv * jnp.clip(ratio, low, high))
        clipped = (jnp.where(adv > 0, ratio > high, ratio < low)).astype(jnp.float32)
    elif cfg.kind == "gspo":
        seq_ratio = jnp.exp(jnp.sum(log_ratio, axis=1) / token_count)[:, None]    # [seqs, 1]
        # Value s_i on every token, gradient s_i * grad log pi_t (GSPO-token).
        token_ratio = (jax.lax.stop_gradient(seq_ratio)
                       * jnp.exp(logp - jax.lax.stop_gradient(logp)))
        per_token = tis * jnp.maximum(-adv * token_ratio, -adv * jnp.clip(token_ratio, low, high))
        clipped = jnp.broadcast_to(((seq_ratio > high) | (seq_ratio < low)).astype(jnp.float32),
                                   logp.shape)
    elif cfg.kind == "cispo":
        weight = jax.lax.stop_gradient(jnp.clip(ratio, low, high))
        per_token = -tis * weight * adv * logp
        clipped = ((ratio > high) | (ratio < low)).astype(jnp.float32)
    else:
        raise ValueError(f"unknown loss kind {cfg.kind!r}; choose one of {LOSS_KINDS}")

    if reference_logp is not None and cfg.kl_coef:
        d = jax.lax.stop_gradient(reference_logp) - logp
        per_token = per_token + cfg.kl_coef * (jnp.exp(d) - d - 1.0)   # k3 estimator of KL

    if normaliser is None:
        normaliser = seqs * (cfg.max_tokens or tokens)
    loss = jnp.sum(per_token * keep) / normaliser
    denom = jnp.maximum(jnp.sum(mask), 1.0)
    mismatch = jnp.exp(-log_rho) - 1.0 + log_rho   # k3 of KL(pi_prox || mu) per token
    real = (jnp.sum(mask, axis=1) > 0).astype(jnp.float32)     # rows with a trained token
    metrics = {
        "clip_fraction": jnp.sum(clipped * keep) / jnp.maximum(jnp.sum(keep), 1.0),
        "is_weight_mean": jnp.sum(tis * mask) / denom,
        "is_weight_max": jnp.max(jnp.where(mask > 0, jnp.exp(jnp.minimum(log_rho, 80.0)), 0.0)),
        "masked_sequence_fraction": (jnp.sum((1.0 - seq_keep) * real)
                                     / jnp.maximum(jnp.sum(real), 1.0)),
        "mismatch_kl": jnp.sum(mismatch * mask) / denom,
        "tokens": jnp.sum(mask),          # what the means above average over
        "sequences": jnp.sum(real),
    }
    return loss, metrics
