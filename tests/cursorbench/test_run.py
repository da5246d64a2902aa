from cursorbench import run


def test_run_says_model_agents_are_not_there_yet(tmp_path, capsys):
    code = run.main(["--suite=mini:test:1", "--agent=model:ckpt", f"--out={tmp_path}"])
    assert code == 2
    assert "not available yet" in capsys.readouterr().err
