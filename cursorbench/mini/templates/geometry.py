"""Template: page layout with axis-aligned rectangles (areas, overlaps, bounding boxes)."""
from cursorbench.mini.templates import Template

SHAPES = '''"""Axis-aligned rectangles given as (x, y, width, height)."""


def area(rect):
    """Width times height."""
    x, y, width, height = rect
    return width * height


def perimeter(rect):
    """Twice the sum of width and height."""
    x, y, width, height = rect
    return 2 * (width + height)


def contains_point(rect, px, py):
    """Whether the point lies inside the rectangle or on its border."""
    x, y, width, height = rect
    return x <= px <= x + width and y <= py <= y + height


def overlap_area(a, b):
    """Area of the intersection of two rectangles; 0 if they do not overlap."""
    left = max(a[0], b[0])
    right = min(a[0] + a[2], b[0] + b[2])
    bottom = max(a[1], b[1])
    top = min(a[1] + a[3], b[1] + b[3])
    if right <= left or top <= bottom:
        return 0
    return (right - left) * (top - bottom)
'''

LAYOUT = '''"""Placing rectangles on a page."""
from .shapes import area, overlap_area

MARGIN = $MARGIN


def total_area(rects):
    """Sum of the areas."""
    return sum(area(rect) for rect in rects)


def bounding_box(rects):
    """The smallest rectangle holding them all, grown by the margin on every side."""
    left = min(rect[0] for rect in rects)
    bottom = min(rect[1] for rect in rects)
    right = max(rect[0] + rect[2] for rect in rects)
    top = max(rect[1] + rect[3] for rect in rects)
    return (left - MARGIN, bottom - MARGIN, right - left + 2 * MARGIN, top - bottom + 2 * MARGIN)


def count_overlaps(rects):
    """How many pairs of rectangles overlap."""
    count = 0
    for i in range(len(rects)):
        for j in range(i + 1, len(rects)):
            if overlap_area(rects[i], rects[j]) > 0:
                count += 1
    return count


def row_positions(widths, gap):
    """x positions of boxes placed left to right from the margin, `gap` apart."""
    positions = []
    x = MARGIN
    for width in widths:
        positions.append(x)
        x += width + gap
    return positions


def coverage(rects, page):
    """Share of the page's area the rectangles cover, ignoring overlaps, two decimals."""
    return round(total_area(rects) / area(page), 2)
'''


def _rect(r):
    return (r.randint(0, 12), r.randint(0, 12), r.randint(1, 8), r.randint(1, 8))


def _rects(r, least=1):
    return [_rect(r) for _ in range(r.randint(least, 5))]


TEMPLATE = Template(
    name="geometry",
    packages=("layout", "geometry", "pagekit"),
    subsystem="the page layout code",
    modules={"shapes.py": SHAPES, "layout.py": LAYOUT},
    params={"MARGIN": (1, 2, 4, 5)},
    inputs={
        "area": lambda r, p: (_rect(r),),
        "perimeter": lambda r, p: (_rect(r),),
        "contains_point": lambda r, p: ((rect := _rect(r)),
                                        rect[0] + r.choice([0, rect[2], r.randint(-2, 10)]),
                                        rect[1] + r.choice([0, rect[3], r.randint(-2, 10)])),
        "overlap_area": lambda r, p: (_rect(r), _rect(r)),
        "total_area": lambda r, p: (_rects(r),),
        "bounding_box": lambda r, p: (_rects(r),),
        "count_overlaps": lambda r, p: (_rects(r, least=2),),
        "row_positions": lambda r, p: ([r.randint(1, 9) for _ in range(r.randint(1, 5))],
                                       r.randint(0, 3)),
        "coverage": lambda r, p: (_rects(r), (0, 0, r.randint(10, 30), r.randint(10, 30))),
    },
    constants={"MARGIN": "the margin kept around the laid-out boxes"},
    renames={"area": "rect_area", "overlap_area": "intersection_area"},
)
