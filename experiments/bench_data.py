"""Input-pipeline throughput: tokens/s the grain pipeline delivers, beside raw tokenizer speed.

    python -m experiments.bench_data

Runs on the default corpus (this interpreter's stdlib sources) with the default tokenizer and
token cache (both built once under `$C2JAX_CACHE_DIR`, default `<repo>/.cache`; the first run
reports how long that took). Prints a markdown table: each pipeline row counts the
`[batch, seq]` positions delivered per second of wall time, the quantity the train step
consumes (issue #3 wants it >= 10x the step's tokens/s).
"""
import platform
import time

from absl import app, flags

from c2jax.data import corpus, tokenizer
from c2jax.data.config import data_config
from c2jax.data.pipeline import DocumentEncoder, make_batch_iterator

_SCALE = flags.DEFINE_float("scale", 1.0, "multiplies the number of timed batches / files")
_VOCAB_SIZE = flags.DEFINE_integer("vocab_size", 8192, "vocabulary of the default tokenizer")

_WARMUP_BATCHES = 5
_ENCODE_SAMPLE_FILES = 200  # stdlib files encoded to time the tokenizer on its own
#: (label, data_config overrides, timed batches): the tiny pretrain shape with the concurrency
#: knobs switched off one at a time, without the token cache, and the long-context shape.
SETTINGS = (
    ("8x256, defaults (token cache, 1 read thread, prefetch 2)",
     dict(seq_len=256, batch_size=8), 1000),
    ("8x256, inline read, no prefetch",
     dict(seq_len=256, batch_size=8, read_threads=0, prefetch_batches=0), 1000),
    ("8x256, no token cache (tokenise on the fly)",
     dict(seq_len=256, batch_size=8, cache_tokens=False), 100),
    ("1x2048 (long context), defaults", dict(seq_len=2048, batch_size=1), 1000),
)


def time_pipeline(tok: tokenizer.Tokenizer, overrides: dict, num_batches: int) -> float:
    """Tokens (`[batch, seq]` positions) per second of the train split."""
    cfg = data_config(**overrides)
    with make_batch_iterator(cfg, tok) as batches:
        for _ in range(_WARMUP_BATCHES):
            next(batches)
        start = time.perf_counter()
        for _ in range(num_batches):
            next(batches)
        seconds = time.perf_counter() - start
    return num_batches * cfg.batch_size * cfg.seq_len / seconds


def time_encoder(tok: tokenizer.Tokenizer, num_files: int) -> float:
    """Tokens/s of `DocumentEncoder` (BPE + framing) over the first stdlib files, in memory."""
    root = corpus.stdlib_dir()
    texts = [corpus.read_source_text(root / p) for p in corpus.list_source_files(root)[:num_files]]
    encoder = DocumentEncoder(tok)
    start = time.perf_counter()
    tokens = sum(len(encoder.map({"text": text})["ids"]) for text in texts)
    return tokens / (time.perf_counter() - start)


def main(argv):
    del argv
    start = time.perf_counter()
    tok = tokenizer.default_tokenizer(_VOCAB_SIZE.value)
    tokenizer_seconds = time.perf_counter() - start
    start = time.perf_counter()
    with make_batch_iterator(data_config(), tok) as batches:
        next(batches)
    first_batch_seconds = time.perf_counter() - start
    print(f"machine: {platform.machine()}, python {platform.python_version()}, corpus "
          f"{corpus.stdlib_dir()}")
    print(f"default tokenizer ({tok.vocab_size} ids) ready in {tokenizer_seconds:.1f} s; first "
          f"batch in {first_batch_seconds:.1f} s (includes encoding the corpus if not cached)\n")
    print("| what | tokens/s |")
    print("|---|---:|")
    num_files = max(1, int(_ENCODE_SAMPLE_FILES * _SCALE.value))
    rate = time_encoder(tok, num_files)
    print(f"| tokenizer alone: DocumentEncoder on {num_files} files, 1 thread | {rate:,.0f} |")
    for label, overrides, num_batches in SETTINGS:
        rate = time_pipeline(tok, overrides, max(1, int(num_batches * _SCALE.value)))
        print(f"| pipeline {label} | {rate:,.0f} |")


if __name__ == "__main__":
    app.run(main)
