"""Template: number grids (transpose, neighbours, peaks, a greedy walk)."""
from cursorbench.mini.templates import Template

GRID = '''"""Grids as lists of equal-length rows of numbers."""


def transpose(grid):
    """Rows become columns."""
    return [[grid[r][c] for r in range(len(grid))] for c in range(len(grid[0]))]


def row_sums(grid):
    """Sum of each row."""
    return [sum(row) for row in grid]


def neighbours(grid, r, c):
    """Values of the up to eight cells around (r, c), row by row."""
    found = []
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            if dr == 0 and dc == 0:
                continue
            nr, nc = r + dr, c + dc
            if 0 <= nr < len(grid) and 0 <= nc < len(grid[0]):
                found.append(grid[nr][nc])
    return found
'''

PATHS = '''"""Walking over a grid."""
from .grid import neighbours, row_sums

STEP_COST = $STEP_COST


def diagonal_sum(grid):
    """Sum of the main diagonal of a square grid."""
    total = 0
    for i in range(len(grid)):
        total += grid[i][i]
    return total


def peak_cells(grid):
    """(row, column) of the cells greater than all their neighbours."""
    peaks = []
    for r in range(len(grid)):
        for c in range(len(grid[0])):
            if all(grid[r][c] > value for value in neighbours(grid, r, c)):
                peaks.append((r, c))
    return peaks


def heaviest_row(grid):
    """Index of the row with the largest sum (the first on ties)."""
    sums = row_sums(grid)
    best = 0
    for i in range(1, len(sums)):
        if sums[i] > sums[best]:
            best = i
    return best


def greedy_path_cost(grid):
    """Cost of walking down from the top-left cell, each step to the cheaper of the cell
    below and the one below-right, paying the cells' values plus STEP_COST per step."""
    c = 0
    cost = grid[0][0]
    for r in range(1, len(grid)):
        options = [(grid[r][c], c)]
        if c + 1 < len(grid[0]):
            options.append((grid[r][c + 1], c + 1))
        value, c = min(options)
        cost += value + STEP_COST
    return cost
'''


def _grid(r, p, square=False):
    rows = r.randint(1, 4)
    cols = rows if square else r.randint(1, 4)
    return [[r.randint(0, 9) for _ in range(cols)] for _ in range(rows)]


TEMPLATE = Template(
    name="grid",
    packages=("grids", "board", "tiles"),
    subsystem="the grid helpers",
    modules={"grid.py": GRID, "paths.py": PATHS},
    params={"STEP_COST": (1, 2, 3)},
    inputs={
        "transpose": lambda r, p: (_grid(r, p),),
        "row_sums": lambda r, p: (_grid(r, p),),
        "neighbours": lambda r, p: ((g := _grid(r, p)), r.randrange(len(g)),
                                    r.randrange(len(g[0]))),
        "diagonal_sum": lambda r, p: (_grid(r, p, square=True),),
        "peak_cells": lambda r, p: (_grid(r, p),),
        "heaviest_row": lambda r, p: (_grid(r, p),),
        "greedy_path_cost": lambda r, p: (_grid(r, p),),
    },
    constants={"STEP_COST": "the cost of one step of the walk"},
    renames={"neighbours": "adjacent_values", "row_sums": "sum_rows"},
)
