import time

import pytest

from cursorbench.mini import execution

FILES = {
    "pkg/__init__.py": "",
    "pkg/a.py": "def double(x):\n    return 2 * x\n\n\ndef ratio(a, b):\n    return a / b\n",
    "pkg/b.py": "from .a import double\n\n\ndef quad(xs):\n    xs.append(0)\n"
                "    return [double(double(x)) for x in xs]\n",
}


def test_evaluate_imports_the_in_memory_package_and_records_errors():
    out = execution.evaluate(FILES, {"ratio": ("pkg.a", "ratio"), "quad": ("pkg.b", "quad")},
                             {"ratio": [(1, 2), (1, 0)], "quad": [([1, 2],)]})
    assert out["ratio"] == (("ok", 0.5), ("error", "ZeroDivisionError"))
    # The argument list was copied: quad's append did not leak into the case.
    assert out["quad"] == (("ok", [4, 8, 0]),)


def test_variants_never_see_each_other():
    first = execution.evaluate(FILES, {"double": ("pkg.a", "double")}, {"double": [(3,)]})
    changed = {**FILES, "pkg/a.py": FILES["pkg/a.py"].replace("2 * x", "3 * x")}
    second = execution.evaluate(changed, {"double": ("pkg.a", "double")}, {"double": [(3,)]})
    assert first["double"] == (("ok", 6),) and second["double"] == (("ok", 9),)


def test_missing_function_is_an_error_for_every_case():
    out = execution.evaluate(FILES, {"gone": ("pkg.a", "gone")}, {"gone": [(1,), (2,)]})
    assert out["gone"] == (("error", "AttributeError"),) * 2


@pytest.mark.parametrize("expected, actual, same", [
    (0.3, 0.1 + 0.2, True),
    ([0.3, 1], [0.1 + 0.2, 1], True),
    ([0.3, 1], (0.3, 1), False),             # approx of a list wants a list
    ({"a": 0.3}, {"a": 0.30000001}, True),
    ({"a": 0.3}, {"b": 0.3}, False),
    ([("x", 1)], [("x", 1)], True),
    ([("x", 1)], [("x", 2)], False),
    (2, 2.0, True),                          # == as in the pytest assertion
    (1.0, 1.1, False),
])
def test_values_match_mirrors_the_hidden_test_assertion(expected, actual, same):
    assert execution.values_match(expected, actual) is same


def test_isolated_evaluator_survives_endless_loops_and_memory_bombs():
    files = {"p/__init__.py": "",
             "p/m.py": "def spin(n):\n    while True:\n        n += 1\n\n\n"
                       "def grow(s):\n    for _ in range(64):\n        s += s\n    return s\n\n\n"
                       "def fine(n):\n    return n + 1\n"}
    with execution.IsolatedEvaluator(timeout_s=1.0, memory_mb=256) as evaluator:
        started = time.monotonic()
        with pytest.raises(execution.EvaluationFailed, match="longer than"):
            evaluator.evaluate(files, {"spin": ("p.m", "spin")}, {"spin": [(1,)]})
        assert time.monotonic() - started < 5
        grown = evaluator.evaluate(files, {"grow": ("p.m", "grow")}, {"grow": [("ab",)]})
        assert grown["grow"] == (("error", "MemoryError"),)
        # A fresh child serves the next request.
        assert evaluator.evaluate(files, {"fine": ("p.m", "fine")},
                                  {"fine": [(1,)]})["fine"] == (("ok", 2),)
