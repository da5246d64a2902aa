"""The grain input pipeline and the checkpointable batch iterator the train loop reads.

Usage (one call per host)::

    tokenizer = tokenizer_from_config(cfg.data.tokenizer)
    batches = make_batch_iterator(cfg.data, tokenizer, split="train",
                                  shard_index=jax.process_index(), shard_count=jax.process_count())
    batch = next(batches)          # dict: name -> np.ndarray [batch, seq] (packing.ROW_FEATURES)
    state = batches.get_state()    # JSON-serialisable; save it with the checkpoint
    batches.set_state(state)       # on a fresh iterator: continues with exactly the same batches

Stages (grain):

    corpus.open_documents             the split's documents (held out by hash), random access
    DocumentEncoder                   text -> <|bos|> ids <|eos|>; messages -> chat template.
                                      cache_tokens: every document once, then memory-mapped
                                      (token_cache); else lazily, in the reader threads
    MapDataset[shard_index::shard_count]  host i of n reads a disjoint 1/n of the documents
      .shuffle(seed).repeat(epochs)   train only; every epoch reshuffled, deterministically
      copy_task.mix_in                train only, `copy_fraction` > 0: synthetic copy documents
                                      interleaved at a fixed pattern (grain MapDataset.mix)
      .map(next-token shift)          packing.next_token_example, within each document
      .to_iter_dataset(read_threads)  `read_threads` threads produce documents, in order
      packing.pack_examples           rows of seq_len with segment_ids / positions / loss_mask
      .batch(batch_size)              train drops a final partial batch; eval pads it with
                                      all-zero rows (loss_mask 0) so shapes never change
      thread prefetch                 `prefetch_batches` batches ready while the step runs

The eval split is one pass, unshuffled. On several hosts the eval shards can differ by a batch;
a multi-host eval loop should cap the number of eval batches.

Resuming: the state is grain's iterator state (document index, packing remainder) plus a
description of the pipeline (source, split, shard, seq_len, batch_size, seed, tokenizer, ...).
`set_state` refuses a state saved by a different pipeline, naming the fields that differ, since
it would silently feed a different data stream.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import grain
import ml_collections
import numpy as np
from absl import logging
from grain.experimental import ThreadPrefetchIterDataset

from c2jax.data import chat, config, copy_task, corpus, packing, token_cache
from c2jax.data.tokenizer import Tokenizer
from environments import tool_format

#: Version of the layout of `BatchIterator.get_state()`.
STATE_FORMAT = 1
#: Documents each reader thread may have in flight: enough to hide a slow file read behind the
#: tokenisation of the others without holding much of the corpus in memory.
_DOCUMENTS_AHEAD_PER_THREAD = 8


class DocumentEncoder(grain.transforms.Map):
    """A document (corpus format) -> `{"ids": int32 [n], "loss_mask": uint8 [n]}`.

    Text: `<|bos|> encode(text) <|eos|>`, every token trained on (the model learns where a
    document starts and ends). Messages: `chat.ChatTemplate.render`, assistant tokens only.
    """

    def __init__(self, tokenizer: Tokenizer):
        self.template = chat.ChatTemplate(tokenizer)
        self._bos = tokenizer.token_id(tool_format.BOS)
        self._eos = tokenizer.token_id(tool_format.EOS)

    def map(self, document: Mapping[str, Any]) -> dict[str, np.ndarray]:
        if "messages" in document:
            rendered = self.template.render(document["messages"])
            ids, loss_mask = rendered.ids, rendered.loss_mask
        else:
            ids = [self._bos, *self.template.tokenizer.encode(document["text"]), self._eos]
            loss_mask = [1] * len(ids)
        return {"ids": np.asarray(ids, np.int32), "loss_mask": np.asarray(loss_mask, np.uint8)}


def _next_token_example(encoded: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return packing.next_token_example(encoded["ids"], encoded["loss_mask"])


def _stack_rows(rows: Sequence[Mapping[str, np.ndarray]], batch_size: int) -> dict[str, np.ndarray]:
    """Rows of `[seq]` -> a batch of `[batch_size, seq]`, all-zero rows filling a short batch."""
    batch = {}
    for name in packing.ROW_FEATURES:
        stacked = np.stack([row[name] for row in rows])
        missing = batch_size - len(rows)
        batch[name] = np.pad(stacked, ((0, missing), (0, 0))) if missing else stacked
    return batch


class BatchIterator:
    """Yields batches `{name: np.ndarray [batch, seq]}`; `get_state` / `set_state` resume it."""

    def __init__(self, dataset: grain.IterDataset, description: Mapping[str, Any]):
        self.description = dict(description)
        self._iterator: grain.DatasetIterator | None = iter(dataset)

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        return next(self._open_iterator())

    def get_state(self) -> dict[str, Any]:
        """The position in the stream, as plain JSON types (what a checkpoint stores)."""
        state = {"format": STATE_FORMAT, "pipeline": self.description,
                 "grain": self._open_iterator().get_state()}
        # Normalise through JSON so a state used in memory and one read back from disk take
        # the same path through `set_state`.
        return json.loads(json.dumps(state))

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Continues from `state` (from `get_state` of an identically configured pipeline)."""
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"data iterator state has format {state.get('format')!r}, this code "
                             f"reads format {STATE_FORMAT}")
        saved = state["pipeline"]
        differ = sorted(k for k in set(saved) | set(self.description)
                        if saved.get(k) != self.description.get(k))
        if differ:
            details = ", ".join(f"{k}: saved {saved.get(k)!r}, now {self.description.get(k)!r}"
                                for k in differ)
            raise ValueError(f"cannot resume the data iterator: the state was saved by a "
                             f"different pipeline ({details}); resuming would not reproduce the "
                             "data stream, so restore with the original data config")
        self._open_iterator().set_state(packing.state_from_json(state["grain"]))

    def _open_iterator(self) -> grain.DatasetIterator:
        if self._iterator is None:
            raise ValueError("this BatchIterator is closed; build a new one to read more batches")
        return self._iterator

    def close(self) -> None:
        """Stops the prefetch threads (idempotent)."""
        if self._iterator is not None:
            self._iterator.close()
            # Released now so it is collected before interpreter shutdown, where grain's
            # iterator finaliser fails noisily once module globals are gone.
            self._iterator = None

    def __enter__(self) -> BatchIterator:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def make_batch_iterator(cfg: ml_collections.ConfigDict, tokenizer: Tokenizer, *,
                        split: str = "train", shard_index: int = 0,
                        shard_count: int = 1) -> BatchIterator:
    """The batches of `split` for host `shard_index` of `shard_count` (see module docstring).

    Args:
      cfg: a `c2jax.data.config.data_config()`.
      tokenizer: the run's tokenizer (save it with the checkpoints: `save_tokenizer`).
      split: "train" (shuffled, `cfg.num_epochs` passes, None = forever) or "eval" (one
        unshuffled pass over the held-out documents).
      shard_index, shard_count: this host's slice of the documents; hosts are disjoint and
        together cover the split.

    Returns:
      A `BatchIterator` of dicts with `packing.ROW_FEATURES`, each `[cfg.batch_size, cfg.seq_len]`.
    """
    config.validate(cfg)
    if not 0 <= shard_index < shard_count:
        raise ValueError(f"shard_index={shard_index} must be in [0, shard_count={shard_count})")
    documents = corpus.open_documents(cfg.source, split=split, eval_fraction=cfg.eval_fraction,
                                      extensions=tuple(cfg.extensions))
    if shard_count > len(documents):
        raise ValueError(f"shard_count={shard_count} exceeds the {len(documents)} documents of the "
                         f"{split!r} split of {cfg.source}: every host needs at least one")
    encoder = DocumentEncoder(tokenizer)
    if cfg.cache_tokens:
        encoded = token_cache.encode_once(documents, encoder.map,
                                          documents_fingerprint=documents.fingerprint(),
                                          tokenizer_fingerprint=tokenizer.fingerprint())
        logging.info("%s split of %s: %d documents, %d tokens", split, cfg.source, len(encoded),
                     encoded.num_tokens)
        ds = grain.MapDataset.source(encoded)
    else:
        ds = grain.MapDataset.source(documents).map(encoder)
    training = split == "train"
    ds = ds[shard_index::shard_count]
    if training and cfg.shuffle:
        ds = ds.shuffle(seed=cfg.seed)
    ds = ds.repeat(cfg.num_epochs if training else 1)
    if training:
        ds = copy_task.mix_in(
            ds, fraction=cfg.copy_fraction, seed=cfg.seed, shard=shard_index,
            blocks=tuple(int(x) for x in cfg.copy_block), first_id=len(tool_format.SPECIAL_TOKENS),
            vocab_size=tokenizer.vocab_size, bos_id=tokenizer.token_id(tool_format.BOS),
            eos_id=tokenizer.token_id(tool_format.EOS))
    ds = ds.map(_next_token_example)
    read_options = grain.ReadOptions(
        num_threads=cfg.read_threads,
        prefetch_buffer_size=_DOCUMENTS_AHEAD_PER_THREAD * cfg.read_threads)
    rows = packing.pack_examples(ds.to_iter_dataset(read_options), cfg.seq_len)
    batches = rows.batch(cfg.batch_size, drop_remainder=training,
                         batch_fn=functools.partial(_stack_rows, batch_size=cfg.batch_size))
    if cfg.prefetch_batches:
        batches = ThreadPrefetchIterDataset(batches, prefetch_buffer_size=cfg.prefetch_batches)
    description = {
        "source": str(cfg.source), "extensions": list(cfg.extensions), "split": split,
        "eval_fraction": cfg.eval_fraction, "documents": len(documents),
        "shard_index": shard_index, "shard_count": shard_count, "seq_len": cfg.seq_len,
        "batch_size": cfg.batch_size, "seed": cfg.seed, "shuffle": cfg.shuffle,
        "num_epochs": cfg.num_epochs, "tokenizer": tokenizer.fingerprint()[:16],
    }
    if training and cfg.copy_fraction:   # only when on: states saved before it still resume
        description.update(copy_fraction=cfg.copy_fraction, copy_block=list(cfg.copy_block))
    return BatchIterator(batches, description)
