"""The six bug types of bugfix tasks, as single-line source edits found through the AST.

Every operator lists all the places in a function where it applies (`find_mutations`); the
bugfix generator tries them in a seeded order and keeps the first one a test case notices.
Edits are made on the text, at AST positions, so the rest of the file stays byte-identical
and the reference fix is a one-line diff:

- operator: an arithmetic operator swapped (`+` / `-`, `*` / `/`, `//` / `/`, `%` / `//`);
- comparison: a comparison made strict or loose, or an equality flipped;
- constant: a number in the code changed;
- off_by_one: a range bound, slice bound or integer index shifted by one;
- swapped_args: the first two arguments of a call swapped;
- wrong_variable: a local variable read where another one was meant.
"""
from __future__ import annotations

import ast
import dataclasses
import functools

from cursorbench.mini.project import parse

MUTATION_TYPES = ("operator", "comparison", "constant", "off_by_one", "swapped_args",
                  "wrong_variable")

_OPERATORS = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "/"),
              ast.Div: ("/", "*"), ast.FloorDiv: ("//", "/"), ast.Mod: ("%", "//")}
_COMPARISONS = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="),
                ast.GtE: (">=", ">"), ast.Eq: ("==", "!="), ast.NotEq: ("!=", "==")}
# Swapping the arguments of these is a no-op or an error nobody would write.
_NO_SWAP = frozenset({"max", "min", "round", "isinstance", "getattr", "print", "enumerate"})


@dataclasses.dataclass(frozen=True)
class Edit:
    """Replace columns [start, end) of 1-based `line` with `text`."""
    line: int
    start: int
    end: int
    text: str


@dataclasses.dataclass(frozen=True)
class Mutation:
    """One candidate bug: `edits` all on one line of `path`, inside `function`."""
    kind: str
    path: str
    function: str
    edits: tuple[Edit, ...]

    @property
    def line(self) -> int:
        return self.edits[0].line


def apply(source: str, mutation: Mutation) -> str:
    """The source with the mutation's edits made (right to left, so columns stay valid)."""
    lines = source.split("\n")
    row = lines[mutation.line - 1]
    for edit in sorted(mutation.edits, key=lambda e: e.start, reverse=True):
        row = row[:edit.start] + edit.text + row[edit.end:]
    lines[mutation.line - 1] = row
    return "\n".join(lines)


@functools.lru_cache(maxsize=8192)
def find_mutations(path: str, source: str, function: str, kind: str) -> tuple[Mutation, ...]:
    """Every mutation of type `kind` inside `function` (a top-level function, or `Class.method`)
    of the file, in source order (cached: tasks of one template share sources)."""
    if kind not in MUTATION_TYPES:
        raise ValueError(f"unknown mutation type {kind!r}; choose one of {MUTATION_TYPES}")
    node = find_function(parse(source), function)
    if node is None:
        raise ValueError(f"{path} has no top-level function or method {function!r}")
    lines = source.split("\n")
    body = [n for stmt in _body_without_docstring(node) for n in _walk_outside_fstrings(stmt)]
    finder = _FINDERS[kind]
    found = []
    for edits in finder(body, lines, node):
        edits = tuple(edits)
        if edits and all(edits) and len({e.line for e in edits}) == 1:
            found.append(Mutation(kind=kind, path=path, function=function, edits=edits))
    return tuple(sorted(found, key=lambda m: (m.line, m.edits[0].start, m.edits[0].text)))


def find_function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    """The top-level function `name`, or the method `Class.name`."""
    scope, _, leaf = name.rpartition(".")
    body = tree.body
    if scope:
        cls = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == scope), None)
        body = cls.body if cls is not None else []
    return next((n for n in body if isinstance(n, ast.FunctionDef) and n.name == leaf), None)


def _body_without_docstring(node: ast.FunctionDef) -> list[ast.stmt]:
    body = node.body
    if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        body = body[1:]
    return body


def _walk_outside_fstrings(node: ast.AST):
    """ast.walk that skips f-strings (their inner positions are unreliable before 3.12)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.JoinedStr):
            continue
        yield current
        stack.extend(ast.iter_child_nodes(current))


def _one_line(*nodes: ast.AST) -> bool:
    return all(n.lineno == n.end_lineno == nodes[0].lineno for n in nodes)


def _segment(lines: list[str], node: ast.AST) -> str:
    return lines[node.lineno - 1][node.col_offset:node.end_col_offset]


def _symbol_edit(lines: list[str], left: ast.AST, right: ast.AST, symbol: str, new: str):
    """The edit swapping the operator written between two nodes on one line, if it is there."""
    if not _one_line(left, right):
        return None
    row = lines[left.lineno - 1]
    gap = row[left.end_col_offset:right.col_offset]
    if gap.strip(" ()") != symbol:
        return None
    start = left.end_col_offset + gap.index(symbol)
    return Edit(left.lineno, start, start + len(symbol), new)


def _operator(body, lines, fn):
    for node in body:
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            symbol, new = _OPERATORS[type(node.op)]
            edit = _symbol_edit(lines, node.left, node.right, symbol, new)
            if edit:
                yield [edit]
        elif isinstance(node, ast.AugAssign) and type(node.op) in _OPERATORS:
            symbol, new = _OPERATORS[type(node.op)]
            edit = _symbol_edit(lines, node.target, node.value, symbol + "=", new + "=")
            if edit:
                yield [edit]


def _comparison(body, lines, fn):
    for node in body:
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARISONS:
                symbol, new = _COMPARISONS[type(op)]
                edit = _symbol_edit(lines, operands[i], operands[i + 1], symbol, new)
                if edit:
                    yield [edit]


def _constant(body, lines, fn):
    index_like = _index_like_nodes(body)
    for node in body:
        if (isinstance(node, ast.Constant) and type(node.value) in (int, float)
                and id(node) not in index_like and _one_line(node)):
            value = node.value
            if isinstance(value, int):
                new = value * 2 if abs(value) >= 2 else value + 2
            else:
                new = round(value * 2, 6)
            yield [Edit(node.lineno, node.col_offset, node.end_col_offset, repr(new))]


def _index_like_nodes(body) -> set[int]:
    """ids of constants that are range bounds, slice bounds or indices: off-by-one's domain."""
    ids = set()
    for node in body:
        if _is_range_call(node):
            ids |= {id(n) for arg in node.args for n in ast.walk(arg)}
        elif isinstance(node, ast.Subscript):
            ids |= {id(n) for n in ast.walk(node.slice)}
    return ids


def _is_range_call(node) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "range" and not node.keywords)


def _shift(lines: list[str], node: ast.AST, delta: int) -> Edit | None:
    """An edit moving an integer expression by `delta` (folding `x - 1` into `x`, and so on)."""
    if not _one_line(node):
        return None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        text = repr(node.value + delta)
    elif (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
          and isinstance(node.operand, ast.Constant) and type(node.operand.value) is int):
        text = repr(-node.operand.value + delta)
    elif (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub))
          and isinstance(node.right, ast.Constant) and type(node.right.value) is int):
        sign = 1 if isinstance(node.op, ast.Add) else -1
        offset = sign * node.right.value + delta
        left = _segment(lines, node.left)
        text = left if offset == 0 else f"{left} {'+' if offset > 0 else '-'} {abs(offset)}"
    else:
        text = f"{_segment(lines, node)} {'+' if delta > 0 else '-'} {abs(delta)}"
    return Edit(node.lineno, node.col_offset, node.end_col_offset, text)


def _off_by_one(body, lines, fn):
    int_names = _integer_names(fn)
    for node in body:
        if _is_range_call(node) and 1 <= len(node.args) <= 3:
            stop = node.args[0] if len(node.args) == 1 else node.args[1]
            yield [_shift(lines, stop, -1)]
            yield [_shift(lines, stop, +1)]
            if len(node.args) >= 2:
                yield [_shift(lines, node.args[0], +1)]
        elif isinstance(node, ast.Subscript):
            index = node.slice
            if isinstance(index, ast.Slice):
                if index.upper is not None:
                    yield [_shift(lines, index.upper, -1)]
                    yield [_shift(lines, index.upper, +1)]
                if index.lower is not None:
                    yield [_shift(lines, index.lower, +1)]
            elif _is_integer_index(index, int_names):
                yield [_shift(lines, index, +1)]
                yield [_shift(lines, index, -1)]


def _integer_names(fn: ast.FunctionDef) -> set[str]:
    """Variables that certainly hold integers: range / enumerate loop counters, and names
    assigned from len() or a floor division."""
    names = set()
    for node in ast.walk(fn):
        if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.iter, ast.Call) \
                and isinstance(node.iter.func, ast.Name):
            if node.iter.func.id == "range" and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif (node.iter.func.id == "enumerate" and isinstance(node.target, ast.Tuple)
                  and isinstance(node.target.elts[0], ast.Name)):
                names.add(node.target.elts[0].id)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            value = node.value
            if (isinstance(value, ast.BinOp) and isinstance(value.op, ast.FloorDiv)) or (
                    isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                    and value.func.id == "len"):
                names.add(node.targets[0].id)
    return names


def _is_integer_index(index: ast.AST, int_names: set[str]) -> bool:
    if isinstance(index, ast.Constant):
        return type(index.value) is int
    if isinstance(index, ast.UnaryOp):
        return isinstance(index.operand, ast.Constant) and type(index.operand.value) is int
    if isinstance(index, ast.Name):
        return index.id in int_names
    if isinstance(index, ast.BinOp) and isinstance(index.op, (ast.Add, ast.Sub)):
        return isinstance(index.left, ast.Name) and index.left.id in int_names
    return False


def _swapped_args(body, lines, fn):
    for node in body:
        if (isinstance(node, ast.Call) and len(node.args) >= 2 and not node.keywords
                and not any(isinstance(a, ast.Starred) for a in node.args[:2])
                and not (isinstance(node.func, ast.Name) and node.func.id in _NO_SWAP)
                and _one_line(node.args[0], node.args[1])):
            first, second = node.args[0], node.args[1]
            a, b = _segment(lines, first), _segment(lines, second)
            if a != b:
                yield [Edit(first.lineno, first.col_offset, first.end_col_offset, b),
                       Edit(second.lineno, second.col_offset, second.end_col_offset, a)]


def _wrong_variable(body, lines, fn):
    params = [a.arg for a in fn.args.args]
    assigned: dict[str, int] = {name: fn.lineno for name in params}
    for node in ast.walk(fn):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.For)):
            targets = [node.target]
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name) and name.id != "_":
                    assigned.setdefault(name.id, node.lineno)
    # Not replaced: called names, receivers of method calls (`scores.append` while iterating
    # over scores never ends) and the value of `x += y` when it would become `x += x` (which
    # doubles x every iteration).
    excluded = set()
    for n in body:
        if isinstance(n, ast.Call):
            excluded.add(id(n.func))
            if isinstance(n.func, ast.Attribute):
                excluded.add(id(n.func.value))
    self_updates = {id(n.value): n.target.id for n in body if isinstance(n, ast.AugAssign)
                    and isinstance(n.target, ast.Name) and isinstance(n.value, ast.Name)}
    for node in body:
        if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                and node.id in assigned and id(node) not in excluded and _one_line(node)):
            # Another local already bound on an earlier line: the slip a person makes.
            for other in sorted(assigned):
                if (other != node.id and assigned[other] < node.lineno
                        and self_updates.get(id(node)) != other):
                    yield [Edit(node.lineno, node.col_offset, node.end_col_offset, other)]


_FINDERS = {"operator": _operator, "comparison": _comparison, "constant": _constant,
            "off_by_one": _off_by_one, "swapped_args": _swapped_args,
            "wrong_variable": _wrong_variable}
