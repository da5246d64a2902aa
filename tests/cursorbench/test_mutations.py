import ast

import pytest

from cursorbench.mini import mutations

SOURCE = '''def f(xs, limit):
    """Doc 1 + 2."""
    total = 0
    for i in range(len(xs) - 1):
        if xs[i] < limit:
            total += xs[i + 1] * 2
    return max(total, 0) + helper(total, limit)
'''

EXPECTED = {
    "operator": ["len(xs) + 1", "total -= ", "xs[i + 1] / 2", "xs[i - 1]", ") - helper"],
    "comparison": ["xs[i] <= limit"],
    "constant": ["total = 2", "* 4"],
    "off_by_one": ["range(len(xs))", "range(len(xs) - 2)", "xs[i + 1] < limit", "xs[i + 2]"],
    "swapped_args": ["helper(limit, total)"],
    "wrong_variable": ["len(limit)", "total += limit[i + 1]"],
}


@pytest.mark.parametrize("kind", mutations.MUTATION_TYPES)
def test_each_type_finds_its_edits_and_keeps_code_valid(kind):
    found = mutations.find_mutations("m.py", SOURCE, "f", kind)
    mutated = [mutations.apply(SOURCE, m) for m in found]
    for text in mutated:
        ast.parse(text)
        changed = [a for a, b in zip(SOURCE.splitlines(), text.splitlines()) if a != b]
        assert len(changed) == 1       # a one-line bug, so a one-line reference fix
    for snippet in EXPECTED[kind]:
        assert any(snippet in text for text in mutated), (kind, snippet)
    assert all('"""Doc 1 + 2."""' in text for text in mutated)   # docstrings are left alone


def test_no_swap_of_commutative_builtins_and_no_self_doubling():
    swaps = [mutations.apply(SOURCE, m) for m in
             mutations.find_mutations("m.py", SOURCE, "f", "swapped_args")]
    assert not any("max(0, total)" in s for s in swaps)
    doubling = "def g(s):\n    out = ''\n    for c in s:\n        out += c\n    return out\n"
    wrong = [mutations.apply(doubling, m) for m in
             mutations.find_mutations("m.py", doubling, "g", "wrong_variable")]
    assert not any("out += out" in w for w in wrong)
    assert not any("s.append" in w for w in wrong)


def test_unknown_type_or_function_is_an_error():
    with pytest.raises(ValueError, match="unknown mutation type"):
        mutations.find_mutations("m.py", SOURCE, "f", "typo")
    with pytest.raises(ValueError, match="no top-level function or method"):
        mutations.find_mutations("m.py", SOURCE, "g", "operator")


def test_methods_are_found_by_qualified_name():
    source = "class C:\n    def m(self, a):\n        return a + 1\n"
    (found,) = mutations.find_mutations("c.py", source, "C.m", "operator")
    assert "return a - 1" in mutations.apply(source, found)
