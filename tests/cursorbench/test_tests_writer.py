from cursorbench.mini import tests_writer
from cursorbench.mini.tests_writer import Case


def test_render_groups_imports_and_uses_approx_for_floats():
    text = tests_writer.render("Doc.", [
        Case("pkg.a", "f", (1, [2]), 0.5), Case("pkg.b", "g", ("x",), {"k": (1, 2)}),
        Case("pkg.a", "f", (2, [3]), 1.5)],
        extra_tests=("def test_extra():\n    assert True\n",))
    scope = {}
    assert text.startswith('"""Doc."""\nimport pytest\n\nfrom pkg.a import f\nfrom pkg.b import g')
    assert "assert f(1, [2]) == pytest.approx(0.5)" in text
    assert "def test_f_2():" in text and "assert g('x') == {'k': (1, 2)}" in text
    compile(text, "t.py", "exec")
    assert "def test_extra" in text and scope == {}


def test_render_without_floats_needs_no_pytest():
    text = tests_writer.render("D.", [Case("m", "h", (), [1, 2])])
    assert "import pytest" not in text and "assert h() == [1, 2]" in text
