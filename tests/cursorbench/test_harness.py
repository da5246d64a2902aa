"""Real graded episodes (bwrap sandbox, pytest in it): a handful, one task per kind."""
import json

import environments
import pytest

from cursorbench import agents, harness


@pytest.fixture(scope="module")
def one_per_kind(mini_suite):
    tasks = [environments.load_task(p) for p in mini_suite]
    chosen = {}
    for task in tasks:
        chosen.setdefault(task.extra["kind"], task)
    assert set(chosen) == {"bugfix", "feature", "refactor", "understanding"}
    return list(chosen.values())


def test_oracle_scores_everything_and_null_nothing(tmp_path, one_per_kind):
    oracle = harness.run(one_per_kind, agents.make_agent_factory("oracle"), tmp_path / "o",
                         k=1, workers=2, suite="four", agent="oracle", progress=False)
    null = harness.run(one_per_kind, agents.make_agent_factory("null"), tmp_path / "n",
                       k=1, workers=2, suite="four", agent="null", progress=False)
    assert oracle["mean@1"] == 1.0 and oracle["n_tasks"] == 4
    assert oracle["infra_failure_rate"] == 0.0
    assert null["mean@1"] == 0.0 and null["best_of_k"] == 0.0 and null["n_tasks"] == 4
    assert set(oracle["breakdowns"]["category"]) == {"debug", "feature", "refactor",
                                                     "understanding"}
    records = harness.read_jsonl(tmp_path / "o" / harness.RESULTS)
    code_tasks = [r for r in records if r["category"] != "understanding"]
    assert all(r["diff_lines"] >= 1 and r["tests_passed"] == r["tests_total"] > 0
               for r in code_tasks)
    traces = harness.read_jsonl(tmp_path / "o" / harness.TRAJECTORIES)
    assert len(traces) == 4
    for trace in traces:
        # The replayed oracle trajectory: messages SFT can render, steps with observations.
        assert trace["messages"][0]["role"] == "system"
        assert trace["steps"][-1]["action"]["tool"] == "finish"
        assert sum(m["role"] == "assistant" for m in trace["messages"]) == len(trace["steps"])
        assert not any(s["is_error"] for s in trace["steps"])
    summary = json.loads((tmp_path / "o" / harness.SUMMARY).read_text())
    assert summary["agent"] == "oracle" and summary["pass@k"] == {"1": 1.0}


def test_rerun_skips_done_attempts_and_drops_a_cut_off_line(tmp_path, one_per_kind):
    understanding = [t for t in one_per_kind if t.category == "understanding"]
    out = tmp_path / "run"
    factory = agents.make_agent_factory("oracle")
    harness.run(understanding, factory, out, k=2, suite="s", agent="oracle", progress=False)
    results = out / harness.RESULTS
    assert len(harness.read_jsonl(results)) == 2
    with open(results, "a") as f:
        f.write('{"task_id": "cut off mid-wri')        # a crash during a write
    summary = harness.run(understanding, factory, out, k=3, suite="s", agent="oracle",
                          progress=False)
    records = harness.read_jsonl(results)
    assert sorted(r["attempt"] for r in records) == [0, 1, 2]   # only attempt 2 was run
    assert summary["pass@k"] == {"1": 1.0, "2": 1.0, "3": 1.0}
    with pytest.raises(harness.RunDirError, match="holds a run of agent 'oracle'"):
        harness.run(understanding, factory, out, suite="s", agent="null", progress=False)


def test_infra_failures_are_recorded_retried_and_not_scored(tmp_path, one_per_kind):
    task = [t for t in one_per_kind if t.category == "understanding"][0]

    class Crashing:
        def begin(self, task, observation, info):
            raise RuntimeError("policy server went away")

    out = tmp_path / "run"
    summary = harness.run([task], lambda seed: Crashing(), out, suite="s", agent="x",
                          progress=False)
    (record,) = harness.read_jsonl(out / harness.RESULTS)
    assert record["infra_failure"] and "policy server went away" in record["error"]
    assert summary["infra_failure_rate"] == 1.0 and summary["n_tasks"] == 0
    summary = harness.run([task], agents.make_agent_factory("oracle"), out, suite="s",
                          agent="x", progress=False)
    assert summary["mean@1"] == 1.0 and summary["infra_failures"] == 0


def test_episode_agents_drive_the_env_themselves(tmp_path, one_per_kind):
    task = [t for t in one_per_kind if t.category == "understanding"][0]

    class Answerer:
        def run(self, env, task, observation, info):
            env.step({"tool": "list_dir", "args": {}})
            env.step({"tool": "finish", "args": {"summary": f"It is {task.answer}."}})

    summary = harness.run([task], lambda seed: Answerer(), tmp_path / "r", suite="s",
                          agent="episode", progress=False)
    (trace,) = harness.read_jsonl(tmp_path / "r" / harness.TRAJECTORIES)
    assert summary["mean@1"] == 1.0 and len(trace["steps"]) == 2
