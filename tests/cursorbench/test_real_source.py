import pytest

from cursorbench.real.source import load_package


def test_package_splits_sources_tests_and_indexes_entities(local_package):
    assert set(local_package.sources) == {"geomkit/__init__.py", "geomkit/vectors.py",
                                          "geomkit/polygons.py", "geomkit/report.py"}
    assert set(local_package.tests) == {"tests/test_vectors.py", "tests/test_polygons.py",
                                        "tests/test_report.py"}
    assert local_package.data == {"tests/resources/square.bin": bytes([0, 0, 2, 0, 2, 2, 0, 2,
                                                                       0xFF])}
    entities = {e.name: e for e in local_package.entities}
    center = entities["Polygon.center"]
    assert center.path == "geomkit/polygons.py" and center.calls == {"centroid"}
    assert center.indent == " " * 8 and center.leaf == "center"
    assert entities["norm2"].body_start == entities["norm2"].start + 2   # after the docstring


def test_a_tree_without_tests_is_refused(tmp_path):
    (tmp_path / "m.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="needs both source modules and tests"):
        load_package(tmp_path)
