import random

import pytest

from cursorbench.mini import project
from cursorbench.mini.templates import Template, load_template


def test_instantiate_finds_functions_calls_and_constants():
    p = project.instantiate(load_template("library"), random.Random(0))
    assert p.functions["fine"].calls == {"days_late"}
    assert p.functions["fine"].signature == "fine(borrowed, returned)"
    assert p.callers("due_day") == {"days_late", "fine", "total_fines", "worst_offender",
                                    "due_reminders"}
    path, value = p.constants["LOAN_DAYS"]
    assert path == f"{p.package}/loans.py" and f"LOAN_DAYS = {value!r}" in p.files[path]
    assert p.module_doc(path).startswith("Loans")
    assert all(len(cases) == project.CASES_PER_FUNCTION for cases in p.cases.values())


def test_broken_templates_are_reported_by_name():
    bad = Template(name="bad", packages=("pkg",), subsystem="x",
                   modules={"m.py": "def f(x):\n    return 1 / x\n"},
                   inputs={"f": lambda r, p: (0,)})
    with pytest.raises(project.TemplateError, match=r"f\(0,\) raises ZeroDivisionError"):
        project.instantiate(bad, random.Random(0))
    missing = Template(name="gap", packages=("pkg",), subsystem="x",
                       modules={"m.py": "X = $LIMIT\n"})
    with pytest.raises(project.TemplateError, match="placeholder 'LIMIT'"):
        project.instantiate(missing, random.Random(0))
