"""When a sequence stops: stop tokens and the token budget on the device, stop strings on the host.

Stop tokens (e.g. `<|end_tool_call|>`, `<|end|>`) and `max_new_tokens` are checked inside the
compiled step, so a slot stops at once even when several steps run per call. Stop strings need
text, so the host decodes the newest tokens after each call (`StopStrings`); a hit truncates the
generation after the token that completed the string and retires the slot before the next step.
The stopping token (or the token completing the stop string) is kept in the output, as the chat
template expects (`ChatTemplate.append_completion` appends the sampled `<|end|>`).
"""
from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

#: Fills unused stop-token entries; no token has this id.
NO_STOP = -1


def stop_id_row(stop_tokens: Sequence[int], width: int) -> np.ndarray:
    """int32 `[width]`: the request's stop ids padded with NO_STOP; ValueError when too many."""
    if len(stop_tokens) > width:
        raise ValueError(f"{len(stop_tokens)} stop tokens given, the sampler holds at most "
                         f"{width} per request (raise sampler config max_stop_tokens)")
    row = np.full((width,), NO_STOP, np.int32)
    row[:len(stop_tokens)] = np.asarray(stop_tokens, np.int32)
    return row


def truncate_at_stops(tokens, count, stop_ids, remaining):
    """How many of each row's new tokens are kept, and whether the row stops.

    tokens int `[batch, n]` (the first `count` are candidates), count int `[batch]`, stop_ids
    int `[batch, m]`, remaining int `[batch]` (tokens the row may still emit). Returns
    (kept int32 `[batch]`, stopped bool `[batch]`): tokens up to and including the first stop
    token, at most `remaining`; stopped when a stop token was kept or the budget is spent.
    """
    n = tokens.shape[1]
    index = jnp.arange(n)
    is_stop = jnp.any(tokens[:, :, None] == stop_ids[:, None, :], axis=-1) & (index < count[:, None])
    first_stop = jnp.min(jnp.where(is_stop, index, n), axis=1)          # n when none
    kept = jnp.minimum(jnp.minimum(count, first_stop + 1), remaining)
    stopped = (first_stop < kept) | (kept >= remaining)
    return kept.astype(jnp.int32), stopped


class StopStrings:
    """Finds the first stop string in a growing list of generated ids."""

    def __init__(self, tokenizer, strings: Sequence[str]):
        if strings and tokenizer is None:
            raise ValueError(f"stop strings {list(strings)} need a tokenizer to read the "
                             "generated text: pass tokenizer= to the sampler")
        if any(not s for s in strings):
            raise ValueError("a stop string must not be empty")
        self.tokenizer = tokenizer
        self.strings = tuple(strings)

    def first_stop(self, ids: Sequence[int], new: int) -> int | None:
        """The number of ids to keep when a stop string is completed by one of the last `new`
        ids (the shortest prefix whose text contains a stop string), else None."""
        if not self.strings or not new:
            return None
        text = self.tokenizer.decode(ids)
        if not any(s in text for s in self.strings):
            return None
        # Earlier prefixes were checked on earlier calls, so the hit lies in the new ids.
        for keep in range(len(ids) - new + 1, len(ids) + 1):
            prefix = self.tokenizer.decode(ids[:keep])
            if any(s in prefix for s in self.strings):
                return keep
        return len(ids)
