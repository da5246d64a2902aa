"""The generation engine: continuous batching over a fixed set of slots, on the host.

    engine = Engine(cfg, variables, config=sampler_config(slots=16, max_len=512))
    engine.submit(prompt_ids, max_new_tokens=64, temperature=0.7, seed=1)
    finished = engine.step()           # admit waiting requests, then a few decode steps
    engine.set_params(new_variables, version=7)   # takes effect from the next step
    generations = engine.run()         # until every request finished

Each `step` first prefills waiting requests into free slots (several per call), then runs
`steps_per_call` decode steps (or speculative rounds) for all slots at once; a slot whose
sequence stops is refilled by the next `step`, without waiting for the rest of the batch.

Compiled shapes come from buckets, so a stream of requests compiles a handful of executables
and then never again: prefill rows (a power of two up to `slots`) x prompt length (a power of
two times `min_bucket`, up to `max_len`); decode and speculative rounds: the attention window
(the same length buckets, covering the longest running sequence).

Per-token records (`Generation`): token id, log-probability under the sampling distribution,
the version of the params that produced it, and the experts each MoE layer chose at the
position that produced it (routing[j] is position P-1+j for a prompt of P tokens; the prompt's
other positions are in `prompt_routing`), so the learner can replay the routing of the whole
sequence.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import threading
from collections.abc import Sequence

import jax
import ml_collections
import numpy as np

from c2jax import sharding
from c2jax.model.config import rope_limit, validate as validate_model
from c2jax.model.transformer import abstract_variables, unstack_layers
from c2jax.sampling import config as config_lib
from c2jax.sampling.sampling import SamplingParams, seed_key_data, validate_settings
from c2jax.sampling.speculative import speculative_steps
from c2jax.sampling.state import init_state, state_shardings
from c2jax.sampling.steps import decode_steps, prefill
from c2jax.sampling.stopping import StopStrings, stop_id_row


@dataclasses.dataclass(frozen=True)
class Request:
    """One prompt to continue, and how."""
    prompt: tuple[int, ...]
    max_new_tokens: int
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    stop_tokens: tuple[int, ...] = ()
    stop_strings: tuple[str, ...] = ()


@dataclasses.dataclass
class Generation:
    """The new tokens of one request with their per-token records (n tokens).

    tokens `[n]`, logprobs float32 `[n]` (under the sampling distribution; 0 when greedy),
    versions int `[n]` (params version that produced each token), routing int32
    `[n, moe_layers, k]` (experts chosen at the position that produced each token),
    prompt_routing int32 `[prompt_len - 1, moe_layers, k]` (the prompt's other positions),
    finish_reason: "stop_token", "stop_string" or "length".
    """
    request_id: int
    request: Request
    tokens: list[int]
    logprobs: np.ndarray
    versions: np.ndarray
    routing: np.ndarray
    prompt_routing: np.ndarray
    finish_reason: str


@dataclasses.dataclass
class _Running:
    """Host-side record of a sequence in a slot; grows every step."""
    request_id: int
    request: Request
    stop_strings: StopStrings
    prompt_routing: np.ndarray
    tokens: list = dataclasses.field(default_factory=list)
    logprobs: list = dataclasses.field(default_factory=list)
    versions: list = dataclasses.field(default_factory=list)
    routing: list = dataclasses.field(default_factory=list)

    def add(self, token, logprob, version, routing) -> None:
        self.tokens.append(int(token))
        self.logprobs.append(float(logprob))
        self.versions.append(version)
        self.routing.append(routing)

    def finish(self, reason: str, keep: int | None = None) -> Generation:
        keep = len(self.tokens) if keep is None else keep
        return Generation(self.request_id, self.request, self.tokens[:keep],
                          np.asarray(self.logprobs[:keep], np.float32),
                          np.asarray(self.versions[:keep], np.int64),
                          np.asarray(self.routing[:keep], np.int32).reshape(
                              (keep,) + self.prompt_routing.shape[1:]),
                          self.prompt_routing, reason)


def inference_config(cfg, capacity_factor: float = 0.0) -> ml_collections.FrozenConfigDict:
    """The model config the sampler compiles with (frozen: it is a static jit argument).

    With the `capacity` MoE backend, capacity becomes `tokens` per expert (factor
    n_routed_experts / k) unless `capacity_factor` > 0: no token is dropped, so sampling
    matches the dropless reference, and at decode sizes (a token or a few per slot) the
    padded work is too small to matter.
    """
    validate_model(cfg)
    c = ml_collections.ConfigDict(cfg.to_dict())
    if c.moe_dispatch == "capacity":
        c.capacity_factor = capacity_factor or c.n_routed_experts / c.num_experts_per_tok
    return ml_collections.FrozenConfigDict(c)


def bucket(n: int, minimum: int, maximum: int) -> int:
    """The smallest `minimum * 2**i` >= n, capped at `maximum`."""
    size = minimum
    while size < n:
        size *= 2
    return min(size, maximum)


class Engine:
    """Continuous-batching sampler over `config.slots` slots (see the module docstring).

    Args:
      cfg: the model config. variables: {"params", "router_bias"} (sharded with `mesh`, or
        placed there by the engine). config: `sampler_config()`. version: the params' policy
        version, recorded per token. tokenizer: needed only for stop strings. mesh, rules: run
        sharded (the cache's batch dim follows the activation batch rules).
    """

    def __init__(self, cfg, variables, *, config=None, version: int = 0, tokenizer=None,
                 mesh=None, rules=None):
        self.config = config if config is not None else config_lib.sampler_config()
        config_lib.validate(self.config)
        self.cfg = inference_config(cfg, self.config.capacity_factor)
        if self.config.max_len > rope_limit(self.cfg):
            raise ValueError(
                f"sampler max_len={self.config.max_len} is beyond the model's position range "
                f"({rope_limit(self.cfg)}: max_position_embeddings, or the YaRN range): positions "
                "past it were never trained; lower max_len or extend the model's context")
        self.depth = self.cfg.num_mtp_layers if self.config.speculative else 0
        if self.config.speculative and not self.depth:
            raise ValueError("speculative decoding drafts with the MTP modules, but the model "
                             "has num_mtp_layers = 0; set sampler config speculative=False")
        self.tokenizer = tokenizer
        self._mesh = mesh
        self._rules = rules if rules is not None else sharding.mesh_config().rules
        self._param_shardings = (None if mesh is None else sharding.param_shardings(
            abstract_variables(self.cfg), mesh, self._rules))
        self._lock = threading.Lock()
        self._reference = jax.tree.map(_spec, variables)
        self._variables, self._version = self._check_params(variables), version
        state = init_state(self.cfg, self.config.slots, self.config.max_len,
                           self.config.max_stop_tokens, self.depth)
        if mesh is not None:
            state = jax.device_put(state, state_shardings(state, mesh, self._rules))
        self._state = state
        self._slots: list[_Running | None] = [None] * self.config.slots
        self._keep = np.ones(self.config.slots, bool)
        self._pending: collections.deque[tuple[int, Request]] = collections.deque()
        self._next_id = 0
        self.drafted = 0          # speculative: draft tokens proposed to running sequences
        self.accepted = 0         # ... and accepted
        self.generated_tokens = 0  # tokens emitted over the engine's life (for tokens/s)

    # ------------------------------------------------------------------ params
    @property
    def version(self) -> int:
        return self._version

    def _check_params(self, variables):
        """Places the params once: by the rules under a mesh, else on the default device
        (host numpy arrays, e.g. from Ray's object store, would be copied every step), then
        splits the layer stacks into one buffer per layer (`unstack_layers`: a decode step
        would otherwise copy every layer's weights out of the stack)."""
        if self._param_shardings is not None:
            variables = jax.device_put(variables, self._param_shardings)
        else:
            variables = jax.device_put(variables)
        with self._mesh_context():
            return unstack_layers(variables)

    def set_params(self, variables, version: int) -> None:
        """Swaps in new params (same tree, shapes and dtypes: no recompilation). Thread-safe;
        takes effect at the next decode step, and tokens record `version` from then on."""
        got = jax.tree.map(_spec, variables)
        if jax.tree.structure(got) != jax.tree.structure(self._reference):
            raise ValueError("set_params: the new params tree has a different structure than "
                             "the engine's (another model config?)")
        for (path, new), old in zip(jax.tree_util.tree_leaves_with_path(got),
                                    jax.tree.leaves(self._reference)):
            if new != old:
                raise ValueError(f"set_params: {jax.tree_util.keystr(path)} is {new.shape} "
                                 f"{new.dtype}, the engine was built for {old.shape} {old.dtype}")
        variables = self._check_params(variables)
        with self._lock:
            self._variables, self._version = variables, version

    def _params(self):
        with self._lock:
            return self._variables, self._version

    # ------------------------------------------------------------------ requests
    def submit(self, prompt: Sequence[int], max_new_tokens: int, *, temperature: float = 0.0,
               top_k: int = 0, top_p: float = 1.0, seed: int = 0,
               stop_tokens: Sequence[int] = (), stop_strings: Sequence[str] = ()) -> int:
        """Queues a request; returns its id (`Generation.request_id`)."""
        request = Request(tuple(int(t) for t in prompt), int(max_new_tokens), float(temperature),
                          int(top_k), float(top_p), int(seed),
                          tuple(int(t) for t in stop_tokens), tuple(stop_strings))
        self._validate(request)
        request_id = self._next_id
        self._next_id += 1
        self._pending.append((request_id, request))
        return request_id

    def _validate(self, r: Request) -> None:
        if not r.prompt:
            raise ValueError("a prompt needs at least one token")
        bad = [t for t in r.prompt + r.stop_tokens if not 0 <= t < self.cfg.vocab_size]
        if bad:
            raise ValueError(f"token ids {bad[:5]} are outside the vocabulary "
                             f"[0, {self.cfg.vocab_size})")
        if r.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens={r.max_new_tokens} must be >= 1")
        if len(r.prompt) + r.max_new_tokens > self.config.max_len:
            raise ValueError(f"prompt ({len(r.prompt)} tokens) + max_new_tokens "
                             f"({r.max_new_tokens}) exceeds the cache length max_len="
                             f"{self.config.max_len}; shorten it or raise sampler max_len")
        validate_settings(r.temperature, r.top_k, r.top_p)
        stop_id_row(r.stop_tokens, self.config.max_stop_tokens)
        StopStrings(self.tokenizer, r.stop_strings)

    @property
    def busy(self) -> bool:
        return bool(self._pending) or any(s is not None for s in self._slots)

    def run(self) -> list[Generation]:
        """Steps until every submitted request finished; returns them in finishing order."""
        finished = []
        while self.busy:
            finished += self.step()
        return finished

    def generate(self, requests: Sequence[dict]) -> list[Generation]:
        """Submits `requests` (keyword dicts of `submit`), runs, returns them in order."""
        ids = [self.submit(**r) for r in requests]
        done = {g.request_id: g for g in self.run()}
        return [done[i] for i in ids]

    @property
    def acceptance_rate(self) -> float:
        """Accepted / drafted tokens over all speculative rounds so far (nan before any)."""
        return self.accepted / self.drafted if self.drafted else float("nan")

    # ------------------------------------------------------------------ stepping
    def _mesh_context(self):
        if self._mesh is None:
            return contextlib.nullcontext()
        return sharding.activate(self._mesh, self._rules)

    def step(self) -> list[Generation]:
        """Admits waiting requests into free slots, then decodes; returns what finished."""
        finished: list[Generation] = []
        self._admit(finished)
        if any(s is not None for s in self._slots):
            self._decode(finished)
        return finished

    def _admit(self, finished: list[Generation]) -> None:
        free = [i for i, s in enumerate(self._slots) if s is None]
        count = min(len(free), len(self._pending))
        if not count:
            return
        c = self.config
        admitted = [self._pending.popleft() for _ in range(count)]
        rows = bucket(count, 1, c.slots)
        length = bucket(max(len(r.prompt) for _, r in admitted), c.min_bucket, c.max_len)
        tokens = np.zeros((rows, length), np.int32)
        prompt_lengths = np.ones((rows,), np.int32)
        slots = np.full((rows,), c.slots, np.int32)               # padding rows: dropped
        seeds = np.zeros((rows, 2), np.uint32)
        stop_ids = np.full((rows, c.max_stop_tokens), -1, np.int32)
        remaining = np.ones((rows,), np.int32)
        settings = np.zeros((3, rows), np.float32)
        settings[2] = 1.0
        for g, ((_, r), slot) in enumerate(zip(admitted, free)):
            tokens[g, :len(r.prompt)] = r.prompt
            prompt_lengths[g] = len(r.prompt)
            slots[g] = slot
            seeds[g] = np.asarray(seed_key_data(r.seed))
            stop_ids[g] = stop_id_row(r.stop_tokens, c.max_stop_tokens)
            remaining[g] = r.max_new_tokens
            settings[:, g] = (r.temperature, r.top_k, r.top_p)
        new_rows = {"seed": seeds, "stop_ids": stop_ids, "remaining": remaining,
                    "sampling": SamplingParams(settings[0], settings[1].astype(np.int32),
                                               settings[2])}
        variables, version = self._params()
        with self._mesh_context():
            self._state, outputs = prefill(variables, self._state, tokens, prompt_lengths, slots,
                                           new_rows, cfg=self.cfg)
        token, logprob, routing, stopped = jax.device_get(outputs)
        for g, ((request_id, r), slot) in enumerate(zip(admitted, free)):
            p = len(r.prompt)
            running = _Running(request_id, r, StopStrings(self.tokenizer, r.stop_strings),
                               np.ascontiguousarray(routing[:, g, :p - 1].transpose(1, 0, 2)))
            running.add(token[g], logprob[g], version, routing[:, g, p - 1])
            self.generated_tokens += 1
            self._slots[slot] = running
            self._keep[slot] = True
            self._check_finished(slot, bool(stopped[g]), 1, finished)

    def _window(self) -> int:
        """Attention window covering every running sequence through this call."""
        per_step = self.depth + 1
        longest = max(len(s.request.prompt) + len(s.tokens) - 1
                      for s in self._slots if s is not None)
        c = self.config
        return bucket(longest + c.steps_per_call * per_step, c.min_bucket, c.max_len)

    def _decode(self, finished: list[Generation]) -> None:
        variables, version = self._params()
        window = self._window()
        keep = self._keep.copy()
        step_fn = speculative_steps if self.depth else decode_steps
        with self._mesh_context():
            self._state, outputs = step_fn(variables, self._state, keep, cfg=self.cfg,
                                           steps=self.config.steps_per_call, window=window)
        self._keep[:] = True
        tokens, logprobs, routing, emitted, active = jax.device_get(outputs)
        if not self.depth:   # one token per step: add a per-step token axis of 1
            tokens, logprobs, emitted = tokens[..., None], logprobs[..., None], emitted[..., None]
            routing = routing[:, :, :, None]
        for slot, running in enumerate(self._slots):
            if running is None:
                continue
            before = len(running.tokens)
            for t in range(tokens.shape[0]):
                for j in np.flatnonzero(emitted[t, slot]):
                    running.add(tokens[t, slot, j], logprobs[t, slot, j], version,
                                routing[t, :, slot, j])
                if self.depth and emitted[t, slot, 0]:
                    self.drafted += self.depth
                    self.accepted += int(emitted[t, slot].sum()) - 1
            self.generated_tokens += len(running.tokens) - before
            self._check_finished(slot, not active[slot], len(running.tokens) - before, finished)

    def _check_finished(self, slot: int, stopped: bool, new: int,
                        finished: list[Generation]) -> None:
        running = self._slots[slot]
        keep = running.stop_strings.first_stop(running.tokens, new)
        if keep is not None:
            finished.append(running.finish("stop_string", keep))
            self._keep[slot] = False                  # retire it on the device too
        elif stopped:
            reason = "stop_token" if running.tokens[-1] in running.request.stop_tokens else "length"
            finished.append(running.finish(reason))
        else:
            return
        self._slots[slot] = None


def _spec(a) -> jax.ShapeDtypeStruct:
    """Shape and dtype as placed on a device (host float64 arrays become float32)."""
    return jax.ShapeDtypeStruct(a.shape, jax.dtypes.canonicalize_dtype(a.dtype))
