"""The periodic-recall corpus of experiments/recall_corpus.py: every answer token is a copy of
the token a fixed distance back, and a conversation fills exactly one packed row."""
import json

from c2jax.data.chat import ChatTemplate
from experiments import recall_corpus


def test_answers_copy_the_token_period_plus_two_back_and_fill_one_row(tmp_path,
                                                                       small_tokenizer):
    words = recall_corpus.single_token_words(small_tokenizer, 12)
    assert all(small_tokenizer.encode(" " + w) == [small_tokenizer.encode(" " + w)[0]]
               for w in words)
    period, seq_len = 4, 64
    path = tmp_path / "recall.jsonl"
    recall_corpus.write_recall_corpus(path, small_tokenizer, words, 3, period, seq_len, 0)
    template, separator = ChatTemplate(small_tokenizer), words[-2:]
    separator_ids = {small_tokenizer.encode(" " + w)[0] for w in separator}
    for line in path.read_text().splitlines():
        rendered = template.render(json.loads(line)["messages"])
        ids, mask = rendered.ids, rendered.loss_mask
        assert len(ids) == seq_len + 1               # one row after the next-token shift
        trained = [i for i in range(len(ids) - 1) if mask[i]]    # the final <|end|> aside
        assert len(trained) > seq_len // 2
        for j, i in enumerate(trained):
            if j % (period + 2) < period:     # a listed word: the copy of period + 2 back
                assert ids[i] == ids[i - period - 2] and ids[i] not in separator_ids
            else:                             # a reserved word, where the template's gap was
                assert ids[i] in separator_ids
