import ast
import re

import pytest

from cursorbench.real import generators


def _changed_lines(before, after):
    return sum(a != b for path in before for a, b in
               zip(before[path].splitlines(), after[path].splitlines()))


def test_feature_ablation_stubs_linked_code_across_modules(local_package):
    candidate = generators.generate(local_package, "feature_ablation", 0)
    entities = candidate.spec["entities"]
    assert 3 <= len(entities) <= 8 and 2 <= len(candidate.spec["modules"]) <= 4
    stubbed = sum(text.count("raise NotImplementedError") for text in candidate.broken.values())
    assert stubbed == len(entities)
    for text in candidate.broken.values():
        ast.parse(text)
    assert candidate.solved == local_package.sources
    assert generators.generate(local_package, "feature_ablation", 0) == candidate


def test_combined_mutations_change_several_functions(local_package):
    candidate = generators.generate(local_package, "combined_mutations", 1)
    applied = candidate.spec["mutations"]
    assert 3 <= len(applied) <= 6
    assert len({m["function"] for m in applied}) == len(applied)
    assert _changed_lines(candidate.solved, candidate.broken) == len(applied)


def test_refactor_reversal_renames_across_modules_and_tests(local_package):
    for seed in range(10):
        candidate = generators.generate(local_package, "refactor_reversal", seed)
        (old, new), = candidate.spec["renames"].items()
        assert len(candidate.spec["modules"]) >= 2
        assert any(f"import {old}" in t or f", {old}" in t for t in candidate.broken.values())
        word = re.compile(rf"\b{old}\b")
        assert not any(word.search(t) for t in candidate.solved.values())
        assert any(new in t for t in candidate.tests.values())
        assert not any(word.search(t) for t in candidate.tests.values())
        # Test names are other words: they keep their names (and so their ids).
        assert re.findall(r"def (test_\w+)", "".join(candidate.tests.values())) == \
            re.findall(r"def (test_\w+)", "".join(local_package.tests.values()))


def test_unknown_generator_is_named():
    with pytest.raises(ValueError, match="choose one of"):
        generators.generate(None, "typo", 0)
