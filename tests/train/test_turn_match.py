"""Teacher-forced turn match (c2jax/train/turn_match.py) against greedy decoding one prefix at
a time, and its turn spans against the chat template's loss mask."""
import jax
import jax.numpy as jnp
import numpy as np

from c2jax.data.chat import ChatTemplate
from c2jax.data.tokenizer import train_tokenizer
from c2jax.model import apply, init, model_config
from c2jax.train.turn_match import assistant_turns, turn_match


def _greedy(cfg, variables, prompt, n, width=16):
    """n greedy tokens after `prompt`, one forward of the whole prefix per token (padded on
    the right to `width`, which a causal model ignores, so it compiles once)."""
    forward = jax.jit(lambda v, t: jnp.argmax(apply(v, t, cfg=cfg)[0][0], -1))
    ids = list(prompt)
    for _ in range(n):
        padded = np.zeros((1, width), np.int32)
        padded[0, :len(ids)] = ids
        ids.append(int(forward(variables, jnp.asarray(padded))[len(ids) - 1]))
    return ids


def test_a_turn_the_model_writes_greedily_is_exact_and_a_changed_last_token_is_not():
    cfg = model_config(num_mtp_layers=0, moe_dispatch="dense")
    variables = init(cfg, jax.random.PRNGKey(0))
    prompt = [5, 17, 3, 99, 42]
    ids = _greedy(cfg, variables, prompt, 6)
    span = (len(prompt), len(ids))
    changed = ids[:-1] + [(ids[-1] + 1) % cfg.vocab_size]
    stats = turn_match(cfg, variables, [(ids, [span]), (changed, [span])], seq_len=16)
    # Causal: the changed last token leaves every earlier prediction as it was.
    assert stats["by_turn"][0] == {"turns": 2, "token_accuracy": (1.0 + 5 / 6) / 2, "exact": 0.5}
    # A second turn that does not fit in seq_len is skipped, not scored as a miss.
    late = turn_match(cfg, variables, [(ids + [1] * 20, [span, (20, 24)])], seq_len=16)
    assert late["by_turn"] == {0: {"turns": 1, "token_accuracy": 1.0, "exact": 1.0}}


def test_spans_hold_exactly_the_trained_assistant_tokens(tmp_path):
    tokenizer = train_tokenizer(["def f(x):\n    return x + 1\n" * 20], vocab_size=300)
    template = ChatTemplate(tokenizer)
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "fix f"},
                {"role": "assistant", "content": "Looking.\n",
                 "tool_call": {"tool": "read_file", "args": {"path": "f.py"}}},
                {"role": "tool", "content": "def f(x): return x"},
                {"role": "assistant", "content": "old try", "train": False},
                {"role": "tool", "content": "error"},
                {"role": "assistant", "content": "Done.", "tool_call": {"tool": "finish"}}]
    ids, spans = assistant_turns(template, messages)
    chat = template.render(messages)
    assert ids == chat.ids and len(spans) == 2
    in_spans = np.zeros(len(ids), int)
    for start, end in spans:
        in_spans[start:end] = 1
        assert ids[end - 1] == template.end_id
    assert in_spans.tolist() == chat.loss_mask
