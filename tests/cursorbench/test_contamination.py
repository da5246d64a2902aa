import environments

from cursorbench import contamination


def test_solution_copied_into_the_corpus_is_flagged(tmp_path, mini_suite):
    tasks = [environments.load_task(p) for p in mini_suite]
    code_task = next(t for t in tasks if t.reference_diff)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "leak.py").write_text(contamination.solution_text(code_task))
    (corpus / "other.py").write_text("def unrelated(a, b):\n    return a ** b - 17\n")
    (corpus / "blob.bin").write_bytes(b"\xff\xfe\x00" * 100)
    result = contamination.check(tasks, corpus, n=8, threshold=0.5)
    assert code_task.id in result["flagged"]
    assert result["per_task"][code_task.id]["overlap"] == 1.0
    assert result["files_scanned"] == 2
    (corpus / "leak.py").unlink()
    clean = contamination.check(tasks, corpus, n=8)
    assert clean["flagged"] == [] and clean["mean_overlap"] < 0.1


def test_disjoint_splits_barely_overlap(tmp_path, mini_suite):
    from cursorbench.mini.generate import generate_suite

    train = generate_suite(tmp_path / "train", "train", 20)
    tasks = [environments.load_task(p) for p in mini_suite]
    result = contamination.check(tasks, train[0].parent, n=8)
    assert result["flagged"] == [] and result["mean_overlap"] < 0.2


def test_solution_text_is_the_fixed_code():
    assert contamination.tokens("x = f(a, 1.5)") == ["x", "=", "f", "(", "a", ",", "1.5", ")"]
    assert contamination.ngrams(["a", "b", "c"], 2) == {("a", "b"), ("b", "c")}
