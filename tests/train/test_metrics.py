"""metrics.jsonl and TensorBoard: records as written, non-finite values as null, and a resumed
run's history without the records the killed run wrote after its checkpoint."""
import math
import struct

from tensorboardX.proto.event_pb2 import Event

from c2jax.train.metrics import METRICS_FILE, TENSORBOARD_DIR, MetricsWriter, read_records


def _scalars(workdir, tag):
    """(step, value) of `tag` in the event files: TFRecord framing (length, crc, data, crc)."""
    found = []
    for path in sorted((workdir / TENSORBOARD_DIR).glob("events.out.tfevents.*")):
        data = path.read_bytes()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset:offset + 8])
            event = Event.FromString(data[offset + 12:offset + 12 + length])
            offset += 16 + length
            found += [(event.step, v.simple_value) for v in event.summary.value if v.tag == tag]
    return found


def test_records_go_to_jsonl_and_tensorboard(tmp_path):
    writer = MetricsWriter(tmp_path, start_step=0)
    for step in (1, 2, 3):
        writer.write(step, {"loss": 5.0 - step, "tokens_per_sec": 100.0 * step})
    writer.write(4, {"loss": math.nan, "finite": 0.0})
    writer.close()
    records = read_records(tmp_path / METRICS_FILE)
    assert records[:3] == [{"step": s, "loss": 5.0 - s, "tokens_per_sec": 100.0 * s}
                           for s in (1, 2, 3)]
    assert records[3] == {"step": 4, "loss": None, "finite": 0.0}
    assert [s for s, _ in _scalars(tmp_path, "tokens_per_sec")] == [1, 2, 3]


def test_resume_drops_records_after_the_checkpoint(tmp_path):
    writer = MetricsWriter(tmp_path, start_step=0)
    for step in range(1, 8):                   # the killed run got to step 7
        writer.write(step, {"loss": float(step)})
    writer.close()
    writer = MetricsWriter(tmp_path, start_step=4)   # resumed from the checkpoint at 4
    for step in range(5, 9):
        writer.write(step, {"loss": 10.0 + step})
    writer.close()
    records = read_records(tmp_path / METRICS_FILE)
    assert [(r["step"], r["loss"]) for r in records] == (
        [(s, float(s)) for s in range(1, 5)] + [(s, 10.0 + s) for s in range(5, 9)])

    fresh = MetricsWriter(tmp_path, start_step=0)    # a new run in the same workdir
    fresh.close()
    assert read_records(tmp_path / METRICS_FILE) == []
