"""Template: descriptive statistics of number series (median, variance, outliers)."""
from cursorbench.mini.templates import Template

SUMMARY = '''"""Descriptive statistics of number series."""


def median(values):
    """The middle value; the mean of the two middle ones for an even count."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def variance(values):
    """Population variance, rounded to four decimals."""
    mean = sum(values) / len(values)
    total = 0
    for value in values:
        total += (value - mean) ** 2
    return round(total / len(values), 4)


def value_range(values):
    """Largest minus smallest value."""
    return max(values) - min(values)
'''

OUTLIERS = '''"""Finding and taming outliers."""
from .summary import median, variance

CUTOFF = $CUTOFF


def zscores(values):
    """(value - mean) / standard deviation, rounded to two decimals; all zeros when the
    values are all equal."""
    mean = sum(values) / len(values)
    spread = variance(values) ** 0.5
    if spread == 0:
        return [0.0 for _ in values]
    return [round((value - mean) / spread, 2) for value in values]


def outliers(values):
    """Values whose z-score is beyond the cutoff in either direction."""
    scores = zscores(values)
    return [value for value, score in zip(values, scores) if abs(score) > CUTOFF]


def clip(values, low, high):
    """Every value limited to the range [low, high]."""
    clipped = []
    for value in values:
        if value < low:
            value = low
        elif value > high:
            value = high
        clipped.append(value)
    return clipped


def median_deviation(values):
    """Median of the absolute differences from the median."""
    center = median(values)
    return median([abs(value - center) for value in values])
'''


def _values(r, p, least=1):
    values = [r.randint(0, 20) for _ in range(r.randint(least, 8))]
    if r.random() < 0.4:
        values.append(r.choice([60, 90, -40]))
    return values


TEMPLATE = Template(
    name="series",
    packages=("series", "describe", "numstats"),
    subsystem="the statistics helpers",
    modules={"summary.py": SUMMARY, "outliers.py": OUTLIERS},
    params={"CUTOFF": (1.0, 1.5, 2.0)},
    inputs={
        "median": lambda r, p: (_values(r, p),),
        "variance": lambda r, p: (_values(r, p),),
        "value_range": lambda r, p: (_values(r, p),),
        "zscores": lambda r, p: (_values(r, p, least=2),),
        "outliers": lambda r, p: (_values(r, p, least=3),),
        "clip": lambda r, p: (_values(r, p), 5, 15),
        "median_deviation": lambda r, p: (_values(r, p),),
    },
    constants={"CUTOFF": "the z-score beyond which a value is an outlier"},
    renames={"median": "middle_value", "variance": "population_variance"},
)
