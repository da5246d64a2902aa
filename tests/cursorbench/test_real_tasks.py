import json

import environments

from cursorbench import agents, harness
from cursorbench.real import generators, tasks


def test_node_ids_follow_the_test_files():
    paths = ["tests/test_a.py", "pkg/tests/test_b.py"]
    assert tasks.node_id("tests.test_a::test_x", paths) == "tests/test_a.py::test_x"
    assert tasks.node_id("pkg.tests.test_b.TestC::test_y", paths) == \
        "pkg/tests/test_b.py::TestC::test_y"
    assert tasks.node_id("other::test_z", paths) is None
    assert tasks.node_id("tests.test_a", paths) == "tests/test_a.py"     # a collection error
    assert tasks.pytest_files(["tests/conftest.py", "tests/helper.py", "tests/test_a.py",
                               "pkg/b_test.py"]) == ["pkg/b_test.py", "tests/test_a.py"]


def test_build_writes_validated_tasks_the_oracle_solves_and_null_does_not(
        tmp_path, local_package):
    report = tasks.build([local_package], tmp_path / "suite", seeds=(1,))
    manifest = json.loads((tmp_path / "suite" / "manifest.json").read_text())
    assert manifest == report.manifest and len(manifest) == len(generators.GENERATORS)
    accepted = [e for e in manifest if e["accepted"]]
    assert accepted, manifest
    assert report.size_distribution()["n"] == len(accepted)
    assert all(e["seconds"] >= 0 for e in manifest)
    assert report.clean_run_seconds.keys() == {local_package.name}
    suite = environments.load_suite(tmp_path / "suite")
    for task in suite:
        spec = json.loads((task.path / "task.json").read_text())
        assert spec["suite"] == "real" and spec["prompt_level"] in ("L0", "L1", "L2")
        for hidden in task.hidden_tests:                 # target tests are not visible
            assert not (task.repo_dir / hidden).exists()
            assert (task.hidden_dir / hidden).exists()
        assert "test" not in task.prompt.lower()
        # The binary fixture is carried, so the test reading it passes and is not dropped.
        assert (task.repo_dir / "tests/resources/square.bin").read_bytes()[-1] == 0xFF
        assert "binary_fixture" not in spec["test_command"]
    oracle = harness.run(suite, agents.make_agent_factory("oracle"), tmp_path / "o",
                         suite="real-local", agent="oracle", workers=2, progress=False)
    null = harness.run(suite, agents.make_agent_factory("null"), tmp_path / "n",
                       suite="real-local", agent="null", workers=2, progress=False)
    assert oracle["mean@1"] == 1.0 and null["mean@1"] == 0.0
