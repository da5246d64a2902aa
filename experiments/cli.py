"""What every absl entry point of experiments/ shares: flag parsing that reports a config
typo in one line, and a log filter for orbax's per-file INFO records."""
from __future__ import annotations

import logging as py_logging
import sys

from absl import flags


class QuietOrbax(py_logging.Filter):
    """Drops orbax's INFO records (several per file written, every checkpoint)."""

    def filter(self, record: py_logging.LogRecord) -> bool:
        return record.levelno >= py_logging.WARNING or "/orbax/" not in record.pathname


def parse_flags(argv: list[str]) -> list[str]:
    """absl flag parsing, with a config field that does not exist (a typo in
    `--config.train.stpes=3` or in the config file) reported in one line, not a traceback."""
    try:
        return flags.FLAGS(argv)
    except (AttributeError, KeyError) as e:  # raised by ml_collections for a locked config
        message = e
        while isinstance(message, BaseException) and message.args:
            message = message.args[0]
        overrides = [a for a in argv[1:] if a.startswith("--config.")]
        sys.exit(f"error: the config has no field {message} (overrides given: {overrides})")
