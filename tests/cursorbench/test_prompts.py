import random

from cursorbench.mini import prompts

SYMPTOM = ("fine", "lib/fines.py", (3, 40), 1.5, ("ok", 0))


def test_levels_go_from_vague_to_specific():
    rng = random.Random(0)
    l0 = prompts.bugfix("L0", rng, "the loans code", [SYMPTOM])
    l1 = prompts.bugfix("L1", rng, "the loans code", [SYMPTOM])
    l2 = prompts.bugfix("L2", rng, "the loans code", [SYMPTOM])
    assert "fine" not in l0 and "loans code" in l0
    assert "`fine`" in l1 and "lib/fines.py" in l1 and "1.5" not in l1
    assert "`fine(3, 40)`" in l2 and "`1.5`" in l2 and "returns `0`" in l2
    for text in (l0, l1, l2):
        assert "test" not in text.lower() and "line " not in text


def test_errors_and_several_items_read_naturally():
    rng = random.Random(1)
    l2 = prompts.bugfix("L2", rng, "x", [("f", "a.py", (), 1, ("error", "KeyError"))])
    assert "raises KeyError" in l2
    l1 = prompts.bugfix("L1", rng, "x", [SYMPTOM, ("g", "b.py", (), 1, ("ok", 2))])
    assert "`fine` in `lib/fines.py` and `g` in `b.py` return" in l1
    assert "fix them" in l1 or "track it down" in l1
    rename = prompts.refactor("L2", rng, "x", [("a", "b", "m.py"), ("c", "d", "m.py")])
    assert "old names should no longer exist" in rename


def test_feature_l2_gives_signature_doc_and_example():
    text = prompts.feature("L2", random.Random(0), "x",
                           [("area", "g.py", "area(rect)", "Width times height.", ((1, 2, 3, 4),),
                             12)])
    assert "`area(rect)`" in text and "Width times height." in text
    assert "`area((1, 2, 3, 4))` should return `12`" in text
