"""Building the whole real suite: `python -m cursorbench.build --suite=real`.

Every pinned package (`packages.PACKAGES`) is fetched and prepared, cut by every generator
with its share of `seeds` (`tasks.SEED_SHARE`), validated 3x per group in the real sandbox,
and the accepted candidates are written as tasks that run in the package's own venv. Next to
the tasks: `manifest.json` (every candidate: package, version, generator, seed, spec, verdict)
and `build_report.json` (counts, the reference-fix size distribution, seconds).

Packages' sdists and venvs live in `suites.cache_root()/real-packages` and are reused across
builds; the suite itself is a pure function of the code, the package pins and the seeds
(`version()` names it in the cache).
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cursorbench.real import packages as packages_lib
from cursorbench.real import source, tasks

DEFAULT_SEEDS = 3


def version(specs: Sequence[packages_lib.PackageSpec], seeds: int) -> str:
    """A hash of the real-suite code, the pins and the seeds: a cached build made by other
    code or for other packages is never served."""
    digest = hashlib.sha256(repr((sorted(s.key for s in specs), seeds,
                                  packages_lib.PYTEST_REQUIREMENTS,
                                  [s.test_requires for s in specs])).encode())
    root = Path(__file__).parent
    for path in sorted(root.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def build_suite(out: str | Path, *, specs: Sequence[packages_lib.PackageSpec] | None = None,
                seeds: int = DEFAULT_SEEDS, workers: int = 2, cache: str | Path,
                log: Callable[[str], None] = print,
                progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Builds the suite into `out`; returns the build report (also `out/build_report.json`)."""
    started = time.monotonic()
    specs = list(specs or packages_lib.PACKAGES)
    prepared = [packages_lib.prepare(spec, cache, log=log) for spec in specs]
    loaded = [source.load_package(p.tree, name=p.spec.name) for p in prepared]
    report = tasks.build(loaded, out, seeds=range(seeds), workers=workers, progress=progress,
                         pythons={p.spec.name: str(p.venv) for p in prepared})
    versions = {p.spec.name: p.spec.version for p in prepared}
    for entry in report.manifest:
        entry["version"] = versions[entry["package"]]
    (Path(out) / "manifest.json").write_text(json.dumps(report.manifest, indent=1) + "\n")
    accepted = [e for e in report.manifest if e["accepted"]]
    summary = {
        "packages": versions, "seeds": seeds, "candidates": len(report.manifest),
        "accepted": len(accepted),
        "by_generator": {g: sum(1 for e in accepted if e["generator"] == g)
                         for g in dict.fromkeys(e["generator"] for e in report.manifest)},
        "by_package": {n: sum(1 for e in accepted if e["package"] == n) for n in versions},
        "reference_lines": report.size_distribution(),
        "clean_run_seconds": report.clean_run_seconds,
        "validation_seconds": {n: round(sum(e["seconds"] for e in report.manifest
                                            if e["package"] == n), 1) for n in versions},
        "seconds": round(time.monotonic() - started, 1),
    }
    (Path(out) / "build_report.json").write_text(json.dumps(summary, indent=1) + "\n")
    if not accepted:
        raise packages_lib.PackageError("no candidate was accepted; see manifest.json")
    return summary
