"""CursorBench for c2jax: a contamination-free benchmark of coding agents.

Suites of tasks in the environment's format (the procedural `mini` suite, `humaneval`, the
`real`-package generators), a harness that runs any agent K times per task in the sandboxed
environment, metrics (mean@1 with a bootstrap CI, unbiased pass@k, best-of-K) and reports.
Imports `environments` only, never jax or c2jax. Entry points: `python -m cursorbench.run`,
`python -m cursorbench.build`, `python -m cursorbench.report`,
`python -m cursorbench.contamination`. Guide: docs/cursorbench.md.
"""
