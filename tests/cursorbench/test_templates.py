import random
import re

import pytest

from cursorbench.mini import templates
from cursorbench.mini.project import instantiate

ALL = [name for names in templates.SPLITS.values() for name in names]


def test_splits_share_no_template():
    seen = {}
    for split, names in templates.SPLITS.items():
        for name in names:
            assert name not in seen, f"{name} is in {seen.get(name)} and {split}"
            seen[name] = split


@pytest.mark.parametrize("name", ALL)
def test_template_instantiates_and_its_facts_hold(name):
    template = templates.load_template(name)
    for seed in range(3):
        project = instantiate(template, random.Random(seed))
        lines = sum(text.count("\n") for text in project.files.values())
        assert 20 <= lines <= 150 and 2 <= len(project.files) <= 4
        assert set(template.inputs) <= set(project.functions)
        assert all(o[0] == "ok" for outs in project.expected.values() for o in outs)
        for old, new in template.renames.items():
            assert old in project.functions and new not in project.functions
            assert re.fullmatch(r"[a-z_]+", new)


def test_unknown_split_names_the_splits():
    with pytest.raises(ValueError, match="train, val, test"):
        templates.split_templates("dev")
