"""Laying out a real-suite package from its sdist (a local one: tests download nothing)."""
import io
import tarfile

import pytest

from cursorbench.real import packages, source

SDIST = {
    "demo-1.0/src/demo/__init__.py": '"""Demo."""\nfrom .core import twice\n',
    "demo-1.0/src/demo/core.py": "def twice(x):\n    return 2 * x\n",
    "demo-1.0/tests/test_core.py": "from demo import twice\n\n\ndef test_twice():\n"
                                   "    assert twice(2) == 4\n",
    "demo-1.0/conftest.py": "",
    "demo-1.0/docs/conf.py": "project = 'demo'\n",
    "demo-1.0/setup.py": "raise SystemExit('not run')\n",
}


def _sdist(cache, files=SDIST, name="demo-1.0.tar.gz"):
    (cache / "sdists").mkdir(parents=True)
    with tarfile.open(cache / "sdists" / name, "w:gz") as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_a_src_layout_is_flattened_to_the_package_and_its_tests(tmp_path):
    _sdist(tmp_path)
    spec = packages.PackageSpec("demo", "1.0", modules=("src/demo",), tests="tests")
    root = packages.tree(spec, tmp_path, log=lambda _: None)
    found = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert found == ["conftest.py", "demo/__init__.py", "demo/core.py", "tests/test_core.py"]
    assert oct(root.stat().st_mode & 0o777) == "0o755"      # readable by the sandbox's uid
    package = source.load_package(root, name="demo")
    assert set(package.sources) == {"demo/__init__.py", "demo/core.py"}
    assert packages.tree(spec, tmp_path, log=pytest.fail) == root       # cached: no step rerun


def test_a_wrong_layout_names_the_missing_path_and_leaves_nothing(tmp_path):
    _sdist(tmp_path)
    spec = packages.PackageSpec("demo", "1.0", modules=("demo",), tests="tests")
    with pytest.raises(packages.PackageError, match="demo is not in the sdist"):
        packages.tree(spec, tmp_path, log=lambda _: None)
    assert not (tmp_path / "trees").exists() or not any((tmp_path / "trees").iterdir())


def test_unknown_packages_are_named():
    with pytest.raises(ValueError, match="'numpy'"):
        packages.by_name(["toolz", "numpy"])
    assert [s.name for s in packages.by_name(["attrs"])] == ["attrs"]


def test_an_unbuilt_real_suite_says_how_to_build_it(cache_dir):
    from cursorbench import suites
    with pytest.raises(suites.SuiteError, match="cursorbench.build --suite=real"):
        suites.resolve("real")
