from cursorbench import run


def test_run_names_a_missing_model_checkpoint(tmp_path, capsys):
    missing = tmp_path / "no_such_ckpt"
    code = run.main(["--suite=mini:test:1", f"--agent=model:{missing}", f"--out={tmp_path / 'out'}"])
    assert code == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "neither a training workdir" in err


def test_run_names_an_unknown_category(tmp_path, capsys):
    code = run.main(["--suite=mini:test:1", "--agent=null", "--category=bugfix",
                     f"--out={tmp_path / 'out'}"])
    assert code == 2
    assert "unknown task categories bugfix; choose from debug" in capsys.readouterr().err
