"""The periodic-recall corpus of experiments/yarn_ablation.py (no flags: tests import it).

Every answer token is a copy of the token exactly `period + 2` positions back, and a
conversation renders to exactly one packed row; see `write_recall_corpus`.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from c2jax.data import chat


def single_token_words(tokenizer, count: int) -> list[str]:
    """`count` lowercase words that the tokenizer encodes, after a space, as one token each:
    a word then costs exactly one position, so a list of n words spans n positions."""
    words = []
    for token_id in range(tokenizer.vocab_size):
        piece = tokenizer.decode([token_id])
        word = piece[1:]
        if (piece.startswith(" ") and word.isascii() and word.isalpha() and word.islower()
                and len(word) >= 3 and tokenizer.encode(piece) == [token_id]):
            words.append(word)
        if len(words) == count:
            return words
    raise ValueError(f"the tokenizer has only {len(words)} single-token words; --pool={count}")


def _conversation(listed: list[str], answer: list[str]) -> dict:
    return {"messages": [
        {"role": "user", "content": "Repeat these words:" + "".join(" " + w for w in listed)},
        {"role": "assistant", "content": "".join(" " + w for w in answer)}]}


def write_recall_corpus(path: Path, tokenizer, words: list[str], documents: int, period: int,
                        seq_len: int, seed: int) -> None:
    """`documents` conversations. The user lists `period` random words from `words[:-2]`; the
    assistant answers with words cycling through the list followed by the two reserved words
    `words[-2:]`, which stand where the chat template puts its two tokens between the turns.
    Every answer word is then a copy of the token exactly `period + 2` positions back, in the
    user's list or in the answer. The answer is as long as makes the conversation render to
    `seq_len + 1` ids (`words` are single tokens): exactly one row after the next-token shift,
    so no conversation is split across rows."""
    rng = np.random.default_rng(seed)
    pool, separator = words[:-2], words[-2:]
    template = chat.ChatTemplate(tokenizer)
    overhead = len(template.render(_conversation(pool[:period], pool[:1])["messages"]).ids) - 1
    repeated = seq_len + 1 - overhead
    if repeated < 1:
        raise ValueError(f"seq_len={seq_len} leaves no room for an answer after {period} words")
    with open(path, "w") as out:
        for _ in range(documents):
            listed = [pool[i] for i in rng.integers(0, len(pool), period)]
            unit = listed + separator
            answer = [unit[i % len(unit)] for i in range(repeated)]
            out.write(json.dumps(_conversation(listed, answer)) + "\n")
