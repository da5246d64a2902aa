import json

from cursorbench import build, run


def test_build_writes_a_suite_and_run_scores_it(tmp_path, capsys, cache_dir):
    assert build.main(["--suite=mini:test:3", f"--out={tmp_path / 'suite'}"]) == 0
    assert len(list((tmp_path / "suite").glob("mini-test-*"))) == 3
    assert build.main(["--suite=nonsense", f"--out={tmp_path / 'x'}"]) == 2
    code = run.main([f"--suite={tmp_path / 'suite'}", "--agent=null", "--k=2", "--workers=1",
                     f"--out={tmp_path / 'run'}"])
    assert code == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_tasks"] == 3 and summary["mean@1"] == 0.0
    assert set(summary["pass@k"]) == {"1", "2"}
