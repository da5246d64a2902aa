"""The RL learner: episodes -> fixed-shape batches -> one jitted policy-gradient update.

    batch = make_batch(episodes, advantages, seq_len=2048, microbatch_rows=4)
    learner = Learner(model_cfg, loss_cfg, tx, replay=True)
    state, metrics = learner.update(state, batch)

**Rows.** Every segment of every episode is one row, shifted for next-token prediction:
`inputs[i] = tokens[i]`, `targets[i] = tokens[i + 1]`, and the target's loss mask, behaviour
log-prob and version move with it. Rows are padded to `seq_len` and their count to a multiple
of `microbatch_rows` (a power of two of microbatches, so only a few shapes ever compile);
padding rows have no trained token. A row's advantage is its episode's, so all segments of an
episode (before and after a self-summary) share its reward and advantage.

**The update.** The batch is split into microbatches, scanned inside one jitted call with
gradients summed, so the `[rows, seq, vocab]` logits never exist at once. The token sum of the
loss is divided by one constant for the whole batch (`episodes * seq_len`, Dr.GRPO), so a
token's weight depends neither on its sequence's length nor on its microbatch. With
`updates_per_batch` U > 1 the batch is cut into U parts updated in turn, and the proximal
policy (decoupled PPO) is the params at the start of the step, evaluated once for all rows; with
U = 1 the proximal policy is the current params (ratio 1, no extra forward).

**Temperature** (`temperature`, the config's `rollout.temperature`): the policy trained is
softmax(logits / T), the distribution actors sample and record the log-probs of, so importance
weights compare like with like at any T (at T != 1 a learner scoring the raw logits would see
a mismatch that is all temperature).

**Routing replay** (`replay=True`): the learner's forward uses the experts the actor chose at
every position (`aux["routing"]` of the sampler, per token); the gate weights are recomputed
from the current router over those experts, so the router still learns (c2jax/model/moe.py).
Router biases are not moved during RL (the aux-loss-free update is a pretraining mechanism).

**Sharding and several processes** (`Learner(..., mesh=mesh, rules=rules)`): the rows of every
microbatch are split over the mesh's batch axes (`activation_batch`: data, fsdp, expert) and
the model traces under the mesh and its rules. With several processes each one passes its own
batch (`make_batch` of its own episodes): before the update they agree on the number of
microbatches (empty ones are appended where a process has fewer) and on the normaliser (all
their episodes together), and process p's rows become its share of every global microbatch.
The update is then the one a single process computes over all the episodes.
"""
from __future__ import annotations

import contextlib
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec

from c2jax import distributed, sharding
from c2jax.model import apply
from c2jax.model.config import num_moe_layers
from c2jax.rl.losses import policy_loss
from c2jax.rl.trajectory import Episode
from c2jax.train.losses import token_losses
from c2jax.train.state import TrainState

#: Per-row arrays of a learner batch (besides `routing`), each `[rows, seq]`.
ROW_FIELDS = ("inputs", "targets", "segment_ids", "positions", "loss_mask", "behaviour_logp",
              "versions")


def make_batch(episodes: Sequence[Episode], advantages: Sequence[float], *, seq_len: int,
               microbatch_rows: int, moe_layers: int, k: int) -> dict[str, np.ndarray]:
    """Learner arrays for `episodes` (see module docstring). Returns float32/int32 arrays
    `[microbatches, microbatch_rows, seq_len]` (routing: `[microbatches, moe_layers,
    microbatch_rows, seq_len, k]`), `advantages` `[microbatches, microbatch_rows]` and the scalar
    `normaliser`."""
    segments = [(seg, adv) for ep, adv in zip(episodes, advantages) for seg in ep.segments]
    if any(len(seg) > seq_len for seg, _ in segments):
        raise ValueError(f"a segment is longer than the learner's seq_len={seq_len}: set "
                         "learner.seq_len >= rollout.max_len")
    micro = max(1, -(-len(segments) // microbatch_rows))
    micro = 1 << (micro - 1).bit_length()                       # a power of two
    rows = micro * microbatch_rows
    out = {name: np.zeros((rows, seq_len), np.float32 if name in ("loss_mask", "behaviour_logp")
                          else np.int32) for name in ROW_FIELDS}
    out["versions"][:] = -1
    routing = np.zeros((moe_layers, rows, seq_len, k), np.int32)
    adv = np.zeros((rows,), np.float32)
    for r, (seg, a) in enumerate(segments):
        n = len(seg) - 1                                        # input positions with a target
        out["inputs"][r, :n] = seg.tokens[:-1]
        out["targets"][r, :n] = seg.tokens[1:]
        out["segment_ids"][r, :n] = 1
        out["positions"][r, :n] = np.arange(n)
        out["loss_mask"][r, :n] = seg.loss_mask[1:]
        out["behaviour_logp"][r, :n] = seg.logprobs[1:]
        out["versions"][r, :n] = seg.versions[1:]
        if moe_layers:
            routing[:, r, :n] = seg.routing[:-1].transpose(1, 0, 2)
        adv[r] = a
    batch = {name: value.reshape(micro, microbatch_rows, seq_len) for name, value in out.items()}
    batch["routing"] = routing.reshape(moe_layers, micro, microbatch_rows, seq_len,
                                       k).transpose(1, 0, 2, 3, 4)
    batch["advantages"] = adv.reshape(micro, microbatch_rows)
    batch["normaliser"] = np.float32(max(len(episodes), 1) * seq_len)
    return batch


#: The dim of each batch array that holds its rows (`normaliser` is a scalar).
_ROWS_AXIS = {"routing": 2, "advantages": 1, **{name: 1 for name in ROW_FIELDS}}


def pad_microbatches(batch: dict[str, np.ndarray], microbatches: int) -> dict[str, np.ndarray]:
    """`batch` (`make_batch`) with empty microbatches appended up to `microbatches`: padding
    rows as `make_batch` writes them (no trained token, version -1)."""
    extra = microbatches - batch["inputs"].shape[0]
    out = {"normaliser": batch["normaliser"]}
    for name in _ROWS_AXIS:
        value = batch[name]
        pad = np.full((extra, *value.shape[1:]), -1 if name == "versions" else 0, value.dtype)
        out[name] = np.concatenate([value, pad])
    return out


def agree_across_processes(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """This process's batch, padded to the largest number of microbatches of any process and
    with the normaliser of every process's episodes together (a collective: every process
    calls it with its own batch)."""
    mine = np.asarray([batch["inputs"].shape[0], round(float(batch["normaliser"]))], np.int32)
    every = np.asarray(multihost_utils.process_allgather(mine))          # [processes, 2]
    batch = pad_microbatches(batch, int(every[:, 0].max()))
    batch["normaliser"] = np.float32(every[:, 1].sum())
    return batch


def place_batch(batch: dict[str, np.ndarray], mesh, rules) -> dict[str, jax.Array]:
    """This process's rows -> global arrays with `processes` times the rows, split over the
    batch mesh axes (the normaliser replicated). Raises ValueError if the layout does not give
    every process rows of its own (`distributed.check_split`)."""
    out = {}
    for name, value in batch.items():
        value = np.asarray(value)
        axis = _ROWS_AXIS.get(name)
        if axis is None:
            out[name] = jax.make_array_from_process_local_data(
                NamedSharding(mesh, PartitionSpec()), value)
            continue
        shape = distributed.global_shape(value.shape, axis)
        names = [None] * len(shape)
        names[axis] = "activation_batch"
        where = NamedSharding(mesh, sharding.logical_to_spec(names, rules, mesh, shape))
        distributed.check_split(where, shape, axis, what=f"learner batch's {name!r}")
        out[name] = jax.make_array_from_process_local_data(where, value, shape)
    return out


def token_logprobs(variables, micro, cfg, replay: bool, temperature: float = 1.0):
    """log p(target) and the entropy of the policy at every position, float32 `[rows, seq]`;
    the policy is softmax(logits / temperature), the distribution the actors sample."""
    logits, _ = apply(variables, micro["inputs"], micro["segment_ids"], micro["positions"],
                      cfg=cfg, routing=micro["routing"] if replay else None)
    if temperature != 1.0:
        logits = logits.astype(jnp.float32) / temperature
    ce, lse = token_losses(logits, micro["targets"])
    probs = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
    entropy = lse - jnp.sum(probs * logits.astype(jnp.float32), axis=-1)
    return -ce, entropy


#: Metrics averaged over trained tokens (the rest: `is_weight_max` max, sums as named).
_TOKEN_MEAN = ("clip_fraction", "is_weight_mean", "mismatch_kl", "entropy")


class Learner:
    """Jitted RL updates of a `TrainState` (see module docstring)."""

    def __init__(self, model_cfg, loss_cfg, tx: optax.GradientTransformation, *,
                 replay: bool, updates_per_batch: int = 1, reference=None, mesh=None,
                 rules=None, temperature: float = 1.0):
        self.cfg, self.loss_cfg, self.tx = model_cfg, loss_cfg, tx
        self.temperature = float(temperature)   # the actors' sampling temperature
        self.replay = replay and num_moe_layers(model_cfg) > 0
        self.updates_per_batch = updates_per_batch
        self.reference = reference      # frozen variables for the KL term (loss kl_coef > 0)
        self.mesh, self.rules = mesh, rules   # None: one device, the batch as given
        self._update = jax.jit(self._update_impl, donate_argnums=0)
        self._logprobs = jax.jit(self._logprobs_impl, static_argnames=("replay",))

    def _logprobs_impl(self, variables, batch, *, replay):
        def body(_, micro):
            return None, token_logprobs(variables, micro, self.cfg, replay,
                                        self.temperature)[0]
        micro = {k: v for k, v in batch.items() if k != "normaliser"}
        return jax.lax.scan(body, None, micro)[1]

    def logprobs(self, variables, batch, replay: bool | None = None) -> jax.Array:
        """log p(target) `[microbatches, rows, seq]` under `variables` (no gradient)."""
        return self._logprobs(variables, batch, replay=self.replay if replay is None else replay)

    def _update_impl(self, state: TrainState, batch, proximal, reference):
        variables = lambda p: {"params": p, "router_bias": state.router_bias}  # noqa: E731

        def micro_loss(params, micro, prox, ref):
            logp, entropy = token_logprobs(variables(params), micro, self.cfg, self.replay,
                                           self.temperature)
            loss, metrics = policy_loss(logp, micro["behaviour_logp"], prox,
                                        micro["advantages"], micro["loss_mask"], self.loss_cfg,
                                        reference_logp=ref, normaliser=batch["normaliser"])
            mask = micro["loss_mask"]
            metrics["entropy"] = jnp.sum(entropy * mask) / jnp.maximum(jnp.sum(mask), 1.0)
            return loss, metrics

        grad_fn = jax.value_and_grad(micro_loss, has_aux=True)

        def body(grads, xs):
            micro, prox, ref = xs
            (loss, metrics), g = grad_fn(state.params, micro, prox, ref)
            return jax.tree.map(jnp.add, grads, g), (loss, metrics)

        micro = {k: v for k, v in batch.items() if k != "normaliser"}
        zeros = jax.tree.map(jnp.zeros_like, state.params)
        grads, (losses, metrics) = jax.lax.scan(body, zeros, (micro, proximal, reference))
        grad_norm = optax.tree.norm(grads)
        updates, opt_state = self.tx.update(grads, state.opt_state, state.params)
        finite = jnp.isfinite(grad_norm) & jnp.all(jnp.isfinite(losses))
        params = jax.tree.map(lambda n, o: jnp.where(finite, n, o),
                              optax.apply_updates(state.params, updates), state.params)
        opt_state = jax.tree.map(lambda n, o: jnp.where(finite, n, o), opt_state,
                                 state.opt_state)
        tokens = metrics["tokens"]
        weight = tokens / jnp.maximum(jnp.sum(tokens), 1.0)
        summary = {name: jnp.sum(metrics[name] * weight) for name in _TOKEN_MEAN}
        summary.update(loss=jnp.sum(losses), grad_norm=grad_norm,
                       is_weight_max=jnp.max(metrics["is_weight_max"]),
                       masked_sequence_fraction=(
                           jnp.sum(metrics["masked_sequence_fraction"] * metrics["sequences"])
                           / jnp.maximum(jnp.sum(metrics["sequences"]), 1.0)),
                       trained_tokens=jnp.sum(tokens), finite=finite.astype(jnp.float32))
        new_state = TrainState(step=state.step + 1, params=params, opt_state=opt_state,
                               router_bias=state.router_bias, rng=state.rng)
        return new_state, summary

    def _place(self, batch) -> dict[str, jax.Array]:
        if self.mesh is None:
            return jax.tree.map(jnp.asarray, batch)
        if jax.process_count() > 1:
            batch = agree_across_processes(batch)
        return place_batch(batch, self.mesh, self.rules)

    def _traced_under_mesh(self):
        return (sharding.activate(self.mesh, self.rules) if self.mesh is not None
                else contextlib.nullcontext())

    def matched_mismatch_kl(self, published: dict[int, dict], batch) -> dict[str, float]:
        """The actor/learner mismatch with each token scored under the params that sampled it.

        `published` maps a policy version to the variables published at it. The trained tokens
        of every row (segment) of `batch` (`make_batch`) sampled under one version v are scored
        by the learner (its dtype, routing replay as configured) under `published[v]`, so the
        k3 KL(pi_learner || mu) holds numerics and expert-selection flips only, not the
        policy's drift between versions that the update's `mismatch_kl` (against the current
        params) also holds once tokens are stale. Rows whose tokens span several versions (an
        in-flight weight swap mid-segment: their later tokens attended to a KV cache written
        by older params, which no single forward reproduces) and versions missing from
        `published` are left out. One forward per distinct version. Returns
        `mismatch_kl_matched` and `matched_token_fraction` (the share of trained tokens the KL
        averages over)."""
        mask = np.asarray(batch["loss_mask"]) > 0
        versions = np.where(mask, np.asarray(batch["versions"]), -1)
        newest, oldest = versions.max(axis=-1), np.where(mask, versions, 2 ** 30).min(axis=-1)
        row_version = np.where(newest == oldest, newest, -1)          # [micro, rows]; -1: mixed
        placed = self._place(batch)
        logp = np.zeros(mask.shape, np.float32)
        covered = np.zeros_like(mask)
        with self._traced_under_mesh():
            for version in np.unique(row_version[row_version >= 0]):
                if int(version) not in published:
                    continue
                at = mask & (row_version == version)[..., None]
                scored = np.asarray(jax.device_get(self.logprobs(published[int(version)],
                                                                 placed)))
                logp[at], covered[at] = scored[at], True
        log_rho = (logp - np.asarray(batch["behaviour_logp"]))[covered].astype(np.float64)
        kl = float(np.mean(np.exp(-log_rho) - 1.0 + log_rho)) if log_rho.size else float("nan")
        return {"mismatch_kl_matched": kl,
                "matched_token_fraction": float(covered.sum() / max(mask.sum(), 1))}

    def update(self, state: TrainState, batch) -> tuple[TrainState, dict[str, float]]:
        """One learner step over `batch` (`make_batch`; with several processes, this
        process's): `updates_per_batch` optimizer updates. Returns the new state (its `step`
        advanced by one per update) and float metrics."""
        batch = self._place(batch)
        with self._traced_under_mesh():
            return self._update_all(state, batch)

    def _update_all(self, state: TrainState, batch) -> tuple[TrainState, dict[str, float]]:
        micro = batch["inputs"].shape[0]
        parts = min(self.updates_per_batch, micro)
        reference = None
        if self.loss_cfg.kl_coef and self.reference is not None:
            reference = self.logprobs(self.reference, batch)
        proximal = None
        if parts > 1:
            variables = {"params": state.params, "router_bias": state.router_bias}
            proximal = self.logprobs(variables, batch)
        all_metrics = []
        size = micro // parts
        for i in range(parts):
            part = {k: (v if k == "normaliser" else v[i * size:(i + 1) * size])
                    for k, v in batch.items()}
            prox = None if proximal is None else proximal[i * size:(i + 1) * size]
            ref = None if reference is None else reference[i * size:(i + 1) * size]
            state, metrics = self._update(state, part, prox, ref)
            all_metrics.append(jax.device_get(metrics))
        out = {k: float(np.mean([m[k] for m in all_metrics])) for k in all_metrics[0]}
        out["loss"] = float(sum(m["loss"] for m in all_metrics))
        return state, out
