"""Template: text statistics (words, sentences, frequencies, line breaking)."""
from cursorbench.mini.templates import Template

TOKENS = '''"""Splitting text into words and sentences."""

MIN_WORD_LENGTH = $MIN_LEN


def words(text):
    """Lower-case runs of letters at least MIN_WORD_LENGTH long."""
    found = []
    current = ""
    for ch in text.lower() + " ":
        if ch.isalpha():
            current += ch
        else:
            if len(current) >= MIN_WORD_LENGTH:
                found.append(current)
            current = ""
    return found


def sentences(text):
    """Non-empty sentences, split at '.', '!' and '?', stripped of spaces."""
    parts = []
    start = 0
    for i, ch in enumerate(text):
        if ch in ".!?":
            part = text[start:i].strip()
            if part:
                parts.append(part)
            start = i + 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts
'''

STATS = '''"""Statistics about a text."""
from .tokens import sentences, words

WORDS_PER_LINE = $PER_LINE


def word_frequencies(text):
    """How often each word occurs."""
    counts = {}
    for word in words(text):
        counts[word] = counts.get(word, 0) + 1
    return counts


def longest_word(text):
    """The longest word (the first of equally long ones); '' when there is none."""
    best = ""
    for word in words(text):
        if len(word) > len(best):
            best = word
    return best


def average_sentence_length(text):
    """Mean number of words per sentence, rounded to two decimals."""
    parts = sentences(text)
    if not parts:
        return 0.0
    total = 0
    for part in parts:
        total += len(words(part))
    return round(total / len(parts), 2)


def lines_needed(text):
    """Lines needed to print the words, WORDS_PER_LINE to a line, at least one."""
    count = len(words(text))
    lines = (count + WORDS_PER_LINE - 1) // WORDS_PER_LINE
    return max(lines, 1)
'''

_VOCAB = ("a", "an", "the", "cat", "sat", "on", "mat", "big", "red", "dog", "runs", "fast",
          "over", "hills", "quietly", "yesterday", "to", "be", "or", "not", "river", "go")


def _text(r, p):
    out = []
    for _ in range(r.randint(1, 4)):
        words = [r.choice(_VOCAB) for _ in range(r.randint(1, 7))]
        if r.random() < 0.3:
            words[0] = words[0].capitalize()
        out.append(" ".join(words) + r.choice([".", "!", "?", ". ", ""]))
    return (" ".join(out),)


TEMPLATE = Template(
    name="textstats",
    packages=("textstats", "prose", "wordy"),
    subsystem="the text statistics",
    modules={"tokens.py": TOKENS, "stats.py": STATS},
    params={"MIN_LEN": (1, 2, 3), "PER_LINE": (3, 4, 5, 6)},
    inputs={"words": _text, "sentences": _text, "word_frequencies": _text,
            "longest_word": _text, "average_sentence_length": _text, "lines_needed": _text},
    constants={"MIN_WORD_LENGTH": "the shortest length that counts as a word",
               "WORDS_PER_LINE": "the number of words that fit on a printed line"},
    renames={"words": "split_words", "sentences": "split_sentences"},
)
