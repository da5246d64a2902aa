"""Shared fixtures: a small generated mini suite (written once per test session)."""
from __future__ import annotations

import pytest

from cursorbench.mini.generate import generate_suite


@pytest.fixture(scope="session")
def mini_suite(tmp_path_factory):
    """Tasks 0-9 of mini:test (the kind cycle: 4 bugfix, 3 feature, 2 understanding,
    1 refactor)."""
    root = tmp_path_factory.mktemp("mini-test")
    return generate_suite(root, "test", 10)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """Generated suites go to a temporary cache, not the user's."""
    monkeypatch.setenv("C2JAX_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def evaluator():
    from cursorbench.mini.execution import IsolatedEvaluator

    with IsolatedEvaluator() as e:
        yield e


@pytest.fixture
def make_context(evaluator):
    """make_context(template, seed, difficulty, level) -> draft.Context."""
    import random

    from cursorbench.mini import draft, templates
    from cursorbench.mini.project import instantiate

    def make(template: str, seed: int, difficulty: str, level: str = "L2") -> draft.Context:
        rng = random.Random(seed)
        project = instantiate(templates.load_template(template), rng)
        return draft.Context(project=project, rng=rng, difficulty=difficulty,
                             prompt_level=level, evaluator=evaluator)

    return make


def final_files(task) -> dict:
    """The repo files after the oracle trajectory's edits (simulated)."""
    return {path: task.trajectory.files[path] for path in task.repo}


#: A small local package for the real-suite generators and validators (make test builds no
#: real suite and downloads nothing): 3 linked modules and their tests.
LOCAL_PACKAGE = {
    "geomkit/__init__.py": '"""Plane geometry helpers."""\n',
    "geomkit/vectors.py": '''"""2-D vectors as (x, y) tuples."""


def add(a, b):
    """Component-wise sum."""
    return (a[0] + b[0], a[1] + b[1])


def scale(v, k):
    """v times k."""
    return (v[0] * k, v[1] * k)


def dot(a, b):
    """Dot product."""
    return a[0] * b[0] + a[1] * b[1]


def norm2(v):
    """Squared length."""
    return dot(v, v)
''',
    "geomkit/polygons.py": '''"""Polygons as lists of (x, y) points."""
from .vectors import add, norm2, scale


def centroid(points):
    """Mean of the points."""
    total = (0, 0)
    for p in points:
        total = add(total, p)
    return scale(total, 1 / len(points))


def perimeter2(points):
    """Sum of the squared edge lengths."""
    total = 0
    for i in range(len(points)):
        a, b = points[i], points[(i + 1) % len(points)]
        total += norm2((b[0] - a[0], b[1] - a[1]))
    return total


class Polygon:
    """A polygon."""

    def __init__(self, points):
        self.points = list(points)

    def center(self):
        """Its centroid."""
        return centroid(self.points)

    def shifted(self, dx, dy):
        """A copy moved by (dx, dy)."""
        return Polygon([add(p, (dx, dy)) for p in self.points])
''',
    "geomkit/report.py": '''"""Text reports."""
from .polygons import Polygon, perimeter2
from .vectors import dot


def describe(points):
    """The centre and squared perimeter of a polygon."""
    cx, cy = Polygon(points).center()
    return f"center=({cx:.1f}, {cy:.1f}) p2={perimeter2(points)}"


def alignment(a, b):
    """Whether two vectors point the same way, opposite ways or are orthogonal."""
    if dot(a, b) > 0:
        return "same"
    return "opposite" if dot(a, b) < 0 else "orthogonal"
''',
    "tests/test_vectors.py": '''from geomkit.vectors import add, dot, norm2, scale


def test_add():
    assert add((1, 2), (3, 5)) == (4, 7)


def test_scale():
    assert scale((1, -2), 3) == (3, -6)


def test_dot():
    assert dot((1, 2), (3, 4)) == 11


def test_norm2():
    assert norm2((3, 4)) == 25
''',
    "tests/test_polygons.py": '''from geomkit.polygons import Polygon, centroid, perimeter2

SQUARE = [(0, 0), (2, 0), (2, 2), (0, 2)]


def test_centroid():
    assert centroid(SQUARE) == (1.0, 1.0)


def test_perimeter2():
    assert perimeter2(SQUARE) == 16
    assert perimeter2([(0, 0), (3, 4), (0, 4)]) == 25 + 9 + 16


def test_polygon_center_and_shift():
    moved = Polygon(SQUARE).shifted(1, -1)
    assert moved.points[1] == (3, -1)
    assert moved.center() == (2.0, 0.0)
''',
    "tests/resources/square.bin": bytes([0, 0, 2, 0, 2, 2, 0, 2, 0xFF]),  # not UTF-8
    "tests/test_report.py": '''from pathlib import Path

from geomkit.report import alignment, describe

SQUARE_BIN = Path(__file__).parent / "resources" / "square.bin"


def test_describe_a_square_read_from_a_binary_fixture():
    xs = list(SQUARE_BIN.read_bytes()[:-1])
    assert describe(list(zip(xs[::2], xs[1::2]))) == "center=(1.0, 1.0) p2=16"


def test_describe():
    assert describe([(0, 0), (2, 0), (2, 2), (0, 2)]) == "center=(1.0, 1.0) p2=16"


def test_alignment():
    assert alignment((1, 0), (2, 1)) == "same"
    assert alignment((1, 0), (-1, 0)) == "opposite"
    assert alignment((1, 0), (0, 3)) == "orthogonal"
''',
}


@pytest.fixture
def local_package(tmp_path):
    """The local package, loaded as the real-suite generators see it."""
    from cursorbench.real.source import load_package
    from cursorbench.taskdir import write_files

    write_files(tmp_path / "geomkit-src", LOCAL_PACKAGE)
    return load_package(tmp_path / "geomkit-src", name="geomkit")
