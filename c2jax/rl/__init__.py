"""Asynchronous RL (stage B): losses (`losses`), shaped rewards (`rewards`)."""
