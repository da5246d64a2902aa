import json

import pytest

from cursorbench import harness, report


def _fake_run(root, agent, resolved):
    """A run directory as cursorbench.run writes it (records and summary)."""
    from cursorbench import metrics

    root.mkdir()
    records = []
    for i, ok in enumerate(resolved):
        for attempt in range(2):
            records.append({"task_id": f"t{i}", "attempt": attempt, "resolved": ok,
                            "infra_failure": False, "category": ["debug", "feature"][i % 2],
                            "difficulty": "easy", "kind": "bugfix", "prompt_level": f"L{i % 3}",
                            "steps": 4, "output_tokens": None, "action_chars": 400,
                            "diff_lines": 1, "elapsed_s": 1.0, "reference_lines": 1})
    (root / harness.RESULTS).write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = {"suite": "mini:test", "agent": agent, **metrics.summarize(records, 2)}
    (root / harness.SUMMARY).write_text(json.dumps(summary))


def test_report_compares_runs_in_a_table_and_plots(tmp_path):
    _fake_run(tmp_path / "a", "oracle", [True] * 4)
    _fake_run(tmp_path / "b", "null", [False, True, False, False])
    path = report.write_report([str(tmp_path / "a"), str(tmp_path / "b")], tmp_path / "rep")
    text = path.read_text()
    assert "| oracle @ mini:test | 4 | 100.0% [100.0%, 100.0%] |" in text
    assert "| null @ mini:test | 4 | 25.0%" in text
    assert "## mean@1 by category" in text and "## mean@1 by prompt level" in text
    assert "100.0 (est.)" in text                 # 400 action chars / 4
    for name in ("pass_at_k", "accuracy_by_category", "accuracy_by_level",
                 "accuracy_vs_tokens"):
        data = (tmp_path / "rep" / f"{name}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_missing_summary_is_explained(tmp_path):
    with pytest.raises(ValueError, match="run python -m cursorbench.run"):
        report.load_run(tmp_path)
    assert report.main([str(tmp_path), "--out", str(tmp_path / "r")]) == 2
