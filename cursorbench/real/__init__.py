"""The `real` suite: tasks cut from real Python packages that ship their own test suites.

Generators (`generators.py`) break a package in ways that need multi-file work (feature
ablation, combined mutations, refactor reversal); `validate.py` keeps a candidate only if its
target tests fail 3/3 on the broken tree and pass 3/3 with the reference fix and on the clean
tree, dropping flaky tests; `tasks.py` writes a validated candidate in the environment's task
format with the target test files hidden. See docs/cursorbench.md for what is not built yet.
"""
