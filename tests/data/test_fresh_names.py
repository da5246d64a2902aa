"""Fresh package and module names for SFT conversations (c2jax/data/fresh_names.py)."""
import random
import re

from c2jax.data.fresh_names import fresh_names, names_in

SYSTEM = {"role": "system", "content": "Tools: read_file(path) reads e.g. ledger/savings.py."}
CONVERSATION = [
    SYSTEM,
    {"role": "user", "content": "What is the yearly interest rate on savings?"},
    {"role": "assistant", "content": "", "tool_call": {"tool": "list_dir", "args": {}}},
    {"role": "tool", "content": "ledger/\n  __init__.py\n  interest.py\n  savings.py\n"
                                "tests/\n  test_interest.py\n  test_savings.py"},
    {"role": "assistant", "content": "Let me read ledger/interest.py.\n",
     "tool_call": {"tool": "read_file", "args": {"path": "ledger/interest.py"}}},
    {"role": "tool", "content": '"""Interest on savings."""\nfrom .savings import balance\n'
                                "YEARLY_RATE = 0.02\n"},
    {"role": "assistant", "content": "", "tool_call": {"tool": "run_terminal", "args": {
        "cmd": "python -c 'from ledger.interest import YEARLY_RATE; print(YEARLY_RATE)'"}}},
    {"role": "tool", "content": "0.02\n[exit code 0]"},
    {"role": "assistant", "content": "", "tool_call": {"tool": "finish", "args": {
        "summary": "It is 0.02 (`YEARLY_RATE` in ledger/interest.py)."}}},
]


def test_names_are_the_package_and_its_modules():
    assert names_in(CONVERSATION) == ["interest", "ledger", "savings"]


def test_every_path_and_import_is_renamed_consistently_and_prose_stays():
    out = fresh_names(CONVERSATION, random.Random(0))
    listing, read = out[3]["content"], out[4]["tool_call"]["args"]["path"]
    package, module = re.fullmatch(r"(\w+)/(\w+)\.py", read).groups()
    assert {package, module}.isdisjoint({"ledger", "interest", "savings"})
    assert listing.startswith(f"{package}/\n") and f"  {module}.py" in listing
    assert f"test_{module}.py" in listing
    assert out[4]["content"] == f"Let me read {read}.\n"
    assert f"from {package}.{module} import" in out[6]["tool_call"]["args"]["cmd"]
    assert out[8]["tool_call"]["args"]["summary"] == f"It is 0.02 (`YEARLY_RATE` in {read})."
    renamed_savings = re.search(r"from \.(\w+) import balance", out[5]["content"]).group(1)
    assert renamed_savings != "savings" and f"  {renamed_savings}.py" in listing
    # prose, values, the tool names and the system prompt are untouched
    assert out[1] == CONVERSATION[1] and out[0] == SYSTEM and out[7] == CONVERSATION[7]
    assert out[5]["content"].startswith('"""Interest on savings."""')
    assert [m.get("tool_call", {}).get("tool") for m in out] == [
        m.get("tool_call", {}).get("tool") for m in CONVERSATION]
    assert set(names_in(out)) == {package, module, renamed_savings}


def test_renaming_is_seeded():
    first = fresh_names(CONVERSATION, random.Random(1))
    assert fresh_names(CONVERSATION, random.Random(1)) == first
    assert fresh_names(CONVERSATION, random.Random(2)) != first
    assert fresh_names(CONVERSATION[:2], random.Random(0)) == CONVERSATION[:2]
