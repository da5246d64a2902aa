"""module_move: tests retargeted to a new module; the reference fix (the move plus a
re-export) passes them in the real grader, the untouched tree fails them."""
import ast

from cursorbench.real import generators, validate
from cursorbench.real.source import load_package
from cursorbench.taskdir import write_files

SHOP = {
    "shop/__init__.py": '"""A shop."""\nfrom .prices import describe, total\n',
    "shop/prices.py": '''"""Prices."""
import math

TAX = 0.25


def _round(x):
    return math.floor(x * 100 + 0.5) / 100


def net(items):
    """Sum of price x quantity."""
    return sum(p * q for p, q in items)


def tax(items):
    return _round(net(items) * TAX)


def total(items):
    return _round(net(items) + tax(items))


def describe(items):
    return f"{len(items)} items, {total(items):.2f}"
''',
    "tests/test_prices.py": '''from shop.prices import _round, describe, net, tax, total

ITEMS = [(1.5, 2), (0.25, 4)]


def test_net():
    assert net(ITEMS) == 4.0


def test_tax_and_total():
    assert tax(ITEMS) == 1.0 and total(ITEMS) == 5.0 and _round(0.125) == 0.13


def test_describe():
    assert describe(ITEMS) == "2 items, 5.00"
''',
    "tests/test_shop.py": '''import shop


def test_package_api():
    assert shop.total([(2, 2)]) == 5.0
''',
}


def test_a_move_retargets_the_tests_and_validates(tmp_path):
    write_files(tmp_path / "shop-src", SHOP)
    package = load_package(tmp_path / "shop-src", name="shop")
    candidate = generators.generate(package, "module_move", 0)
    assert candidate == generators.generate(package, "module_move", 0)      # deterministic
    move = candidate.spec["moves"]
    assert move["from"] == "shop.prices" and len(move["functions"]) >= 3
    new_path = move["to"].replace(".", "/") + ".py"
    assert candidate.broken == package.sources and new_path in candidate.solved
    moved = {n.name for n in ast.parse(candidate.solved[new_path]).body
             if isinstance(n, ast.FunctionDef)}
    assert moved == set(move["functions"])
    left = {n.name for n in ast.parse(candidate.solved["shop/prices.py"]).body
            if isinstance(n, ast.FunctionDef)}
    assert not left & moved
    assert f"from {move['to']} import" in candidate.tests["tests/test_prices.py"]
    assert candidate.tests["tests/test_shop.py"] == SHOP["tests/test_shop.py"]
    verdict = validate.validate(candidate, runs=1)
    assert verdict.accepted, verdict.reasons
    # The retargeted file's tests are the targets; the package-level test passes throughout.
    assert all("test_prices" in t for t in verdict.fail_to_pass)
    assert len(verdict.fail_to_pass) == 3
    assert [t for t in verdict.pass_to_pass if "test_shop" in t]
