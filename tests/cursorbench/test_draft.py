from cursorbench.mini import draft


def test_unique_block_grows_until_the_text_occurs_once():
    text = "a\nx\nb\nx\nc"
    assert draft.unique_block(text, 1, 1) == (1, 2)          # "x\nb" is unique
    assert draft.unique_block(text, 3, 3) == (3, 4)
    assert draft.unique_block(text, 3, 3, grow="up") == (2, 3)
    assert draft.unique_block("a\nb", 0, 0) == (0, 0)


def test_visible_tests_keep_only_cases_passing_on_the_broken_code(make_context):
    ctx = make_context("recipes", 1, "easy")
    project = ctx.project
    broken_outcomes = dict(project.expected)
    name = next(iter(project.cases))
    broken_outcomes[name] = tuple(("error", "Boom") for _ in project.cases[name])
    files = draft.visible_tests(project, broken_outcomes)
    text = "\n".join(files.values())
    assert f"def test_{name}_" not in text
    other = [n for n in project.cases if n != name][0]
    assert f"def test_{other}_1" in text
    assert all(path.startswith("tests/test_") for path in files)
