"""Project templates of the mini suite, and which split each belongs to.

A template is a tiny Python package (2-3 modules, 60-150 lines) with `$NAME` placeholders for
constants, an argument generator for every tested function, and the facts prompts need
(what the code is about, what its constants mean, names a rename may give its functions).
Every generated task instantiates one template with a seeded RNG.

Splits never share a template: train, val and test measure transfer to unseen code, not
memory of it. To add a template, write a module here that defines `TEMPLATE` and add its
name to one split below (tests check every template instantiates and that the splits are
disjoint).
"""
from __future__ import annotations

import dataclasses
import importlib
import random
from collections.abc import Callable, Mapping
from typing import Any

ArgsFn = Callable[[random.Random, Mapping[str, Any]], tuple]


@dataclasses.dataclass(frozen=True)
class Template:
    """One project family.

    name: unique id (also the template's module name).
    packages: package names to choose from (a seed picks one).
    subsystem: how a vague prompt names the code, e.g. "the checkout pricing".
    modules: module file name inside the package -> source; `$NAME` placeholders are filled
      from `params`; modules import each other relatively (`from .pricing import subtotal`).
    params: placeholder -> the values a seed chooses from.
    inputs: tested function -> f(rng, params) returning one argument tuple.
    constants: module-level constant -> what it means, for understanding questions.
    renames: function -> a better name, for rename refactors (functions other modules use).
    """
    name: str
    packages: tuple[str, ...]
    subsystem: str
    modules: Mapping[str, str]
    params: Mapping[str, tuple] = dataclasses.field(default_factory=dict)
    inputs: Mapping[str, ArgsFn] = dataclasses.field(default_factory=dict)
    constants: Mapping[str, str] = dataclasses.field(default_factory=dict)
    renames: Mapping[str, str] = dataclasses.field(default_factory=dict)


#: split -> template names. Disjoint by construction (a test checks it).
SPLITS: dict[str, tuple[str, ...]] = {
    "train": ("cart", "grades", "textstats", "bank", "inventory", "weather", "grid", "series"),
    "val": ("dice", "fitness", "cipher"),
    "test": ("geometry", "library", "recipes", "timeslots"),
}


def load_template(name: str) -> Template:
    """The template defined by `cursorbench.mini.templates.<name>`."""
    module = importlib.import_module(f"{__name__}.{name}")
    template = module.TEMPLATE
    if template.name != name:
        raise ValueError(f"template module {name!r} defines a template named {template.name!r}")
    return template


def split_templates(split: str) -> list[Template]:
    """The templates of one split, in a fixed order."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    return [load_template(name) for name in SPLITS[split]]
