"""Template: toy ciphers and encodings (Caesar shift, run lengths, checksums)."""
from cursorbench.mini.templates import Template

SHIFT = '''"""Shifting letters along the alphabet."""

ALPHABET_SIZE = 26
DEFAULT_SHIFT = $SHIFT


def shift_letter(ch, shift):
    """A lower-case letter moved `shift` places, wrapping around; other characters as is."""
    if not ("a" <= ch <= "z"):
        return ch
    offset = (ord(ch) - ord("a") + shift) % ALPHABET_SIZE
    return chr(ord("a") + offset)


def encrypt(text, shift):
    """The Caesar cipher of the lower-cased text."""
    return "".join(shift_letter(ch, shift) for ch in text.lower())


def decrypt(text, shift):
    """Undoes `encrypt` with the same shift."""
    return encrypt(text, ALPHABET_SIZE - shift % ALPHABET_SIZE)
'''

ENCODE = '''"""Compact and sealed encodings of strings."""
from .shift import DEFAULT_SHIFT, decrypt, encrypt

MODULUS = $MODULUS


def run_length(text):
    """Runs of equal characters as (character, count) pairs."""
    runs = []
    for ch in text:
        if runs and runs[-1][0] == ch:
            runs[-1] = (ch, runs[-1][1] + 1)
        else:
            runs.append((ch, 1))
    return runs


def expand(runs):
    """The text back from (character, count) pairs."""
    return "".join(ch * count for ch, count in runs)


def checksum(text):
    """Character codes weighted by their position (from 1), summed modulo MODULUS."""
    total = 0
    for i, ch in enumerate(text):
        total += (i + 1) * ord(ch)
    return total % MODULUS


def seal(text):
    """The text encrypted with the default shift, then '#' and the checksum of that."""
    secret = encrypt(text, DEFAULT_SHIFT)
    return f"{secret}#{checksum(secret)}"


def unseal(sealed):
    """The original (lower-cased) text of a sealed string; None if the checksum is wrong."""
    secret, _, check = sealed.rpartition("#")
    if checksum(secret) != int(check):
        return None
    return decrypt(secret, DEFAULT_SHIFT)
'''

_WORDS = ("attack", "at", "dawn", "hello", "zebra", "xylophone", "meet", "me", "by", "the",
          "old", "oak", "aaabbb", "zzz")


def _text(r, p):
    return (" ".join(r.choice(_WORDS) for _ in range(r.randint(1, 4))),)


def _sealed(r, p):
    text = _text(r, p)[0]
    secret = "".join(chr(ord("a") + (ord(c) - 97 + p["SHIFT"]) % 26) if c.isalpha() else c
                     for c in text)
    total = sum((i + 1) * ord(c) for i, c in enumerate(secret)) % p["MODULUS"]
    return (f"{secret}#{total + r.choice([0, 0, 1])}",)


TEMPLATE = Template(
    name="cipher",
    packages=("cipher", "secrets_kit", "codec"),
    subsystem="the encoding helpers",
    modules={"shift.py": SHIFT, "encode.py": ENCODE},
    params={"SHIFT": (3, 5, 7, 13), "MODULUS": (97, 251, 997)},
    inputs={
        "shift_letter": lambda r, p: (r.choice("abcxyz z.!"), r.randint(0, 30)),
        "encrypt": lambda r, p: (*_text(r, p), r.randint(0, 30)),
        "decrypt": lambda r, p: (*_text(r, p), r.randint(0, 30)),
        "run_length": lambda r, p: ("".join(r.choice("aab") for _ in range(r.randint(0, 8))),),
        "expand": lambda r, p: ([(r.choice("xyz"), r.randint(1, 4))
                                 for _ in range(r.randint(0, 4))],),
        "checksum": _text,
        "seal": _text,
        "unseal": _sealed,
    },
    constants={"ALPHABET_SIZE": "the number of letters in the alphabet",
               "DEFAULT_SHIFT": "the shift used to seal messages",
               "MODULUS": "the modulus of the checksum"},
    renames={"encrypt": "caesar_encrypt", "decrypt": "caesar_decrypt",
             "checksum": "weighted_checksum"},
)
