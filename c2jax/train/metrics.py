"""Where metrics go: `WORKDIR/metrics.jsonl` (one JSON object per record) and TensorBoard
event files under `WORKDIR/tensorboard/`.

A record is `{"step": int, name: float, ...}`: train records carry `loss`, `tokens_per_sec`,
..., eval records carry `eval_loss`, ... (docs/training.md lists every name). A value that is
NaN or Inf is written as JSON `null` (strict JSON has no NaN), next to `"finite": 0.0`.

Resuming: a run restarted from the checkpoint at step s keeps the records up to step s and
drops the later ones, which the killed run wrote but the resumed run will write again, so the
file stays one consistent history. TensorBoard gets `purge_step = s + 1` for the same reason.
Only process 0 writes.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Mapping

import jax

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"


def read_records(path: str | Path) -> list[dict]:
    """The records of a metrics.jsonl file, in order."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _json_value(value: float) -> float | None:
    return value if math.isfinite(value) else None


class MetricsWriter:
    """Appends records to metrics.jsonl and TensorBoard. `start_step`: the step the run starts
    from (0 for a fresh run: any earlier file is replaced; s for a resumed one)."""

    def __init__(self, workdir: str | Path, start_step: int):
        self.path = Path(workdir) / METRICS_FILE
        self._enabled = jax.process_index() == 0
        self._tensorboard = None
        if not self._enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept = []
        if start_step and self.path.exists():
            kept = [r for r in read_records(self.path) if r["step"] <= start_step]
        # Rewrite-then-rename so a crash here never leaves a half-written history.
        tmp = self.path.with_suffix(".jsonl.tmp")
        with open(tmp, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in kept)
        os.replace(tmp, self.path)
        self._file = open(self.path, "a")
        # Imported here: tensorboardX imports torch (~2 s), which only the writing process needs.
        from tensorboardX import SummaryWriter
        self._tensorboard = SummaryWriter(str(Path(workdir) / TENSORBOARD_DIR),
                                          purge_step=start_step + 1 if start_step else None)

    def write(self, step: int, scalars: Mapping[str, float]) -> None:
        if not self._enabled:
            return
        record = {"step": int(step), **{k: _json_value(float(v)) for k, v in scalars.items()}}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        for name, value in scalars.items():
            self._tensorboard.add_scalar(name, float(value), int(step))

    def close(self) -> None:
        if self._enabled:
            self._file.close()
            self._tensorboard.close()
