"""Template: course grades (averages, letters, a curve, class reports)."""
from cursorbench.mini.templates import Template

SCORES = '''"""Scores (0-100) of the students of one course."""

PASS_MARK = $PASS
TOP_MARK = 100


def average(scores):
    """Mean score rounded to one decimal; 0.0 when there are no scores."""
    if len(scores) == 0:
        return 0.0
    return round(sum(scores) / len(scores), 1)


def letter(score):
    """A from 90, B from 80, C from 70, D from the pass mark, else F."""
    if score >= 90:
        return "A"
    if score >= 80:
        return "B"
    if score >= 70:
        return "C"
    if score >= PASS_MARK:
        return "D"
    return "F"


def curve(scores, bonus):
    """Every score plus the bonus, never above the top mark."""
    curved = []
    for score in scores:
        curved.append(min(score + bonus, TOP_MARK))
    return curved


def count_passing(scores):
    """How many scores reach the pass mark."""
    passed = 0
    for score in scores:
        if score >= PASS_MARK:
            passed += 1
    return passed
'''

REPORT = '''"""Class reports built from the scores."""
from .scores import average, count_passing, letter


def grade_counts(scores):
    """How many students got each letter, for the letters that occur."""
    counts = {}
    for score in scores:
        grade = letter(score)
        counts[grade] = counts.get(grade, 0) + 1
    return counts


def rank(names, scores):
    """Names from the highest score to the lowest (ties keep the input order)."""
    order = sorted(range(len(names)), key=lambda i: -scores[i])
    return [names[i] for i in order]


def top_students(names, scores, count):
    """The names of the best `count` students."""
    return rank(names, scores)[:count]


def summary_line(course, scores):
    """The course, its average and how many students passed, in one line."""
    passed = count_passing(scores)
    return f"{course}: average {average(scores)}, {passed}/{len(scores)} passed"
'''

_NAMES = ("ada", "ben", "cho", "dev", "eli", "fay", "gus", "hal", "ivy", "jon")


def _scores(r, p, least=1):
    marks = (p["PASS"], p["PASS"] - 1, 70, 80, 90, 89)
    return [r.choice(marks) if r.random() < 0.3 else r.randint(30, 100)
            for _ in range(r.randint(least, 8))]


def _class(r, p):
    names = r.sample(_NAMES, r.randint(2, 6))
    return names, [r.randint(30, 100) for _ in names]


TEMPLATE = Template(
    name="grades",
    packages=("grades", "gradebook", "course"),
    subsystem="the gradebook",
    modules={"scores.py": SCORES, "report.py": REPORT},
    params={"PASS": (50, 55, 60, 65)},
    inputs={
        "average": lambda r, p: (_scores(r, p, least=0),),
        "letter": lambda r, p: (r.choice([p["PASS"], p["PASS"] - 1, 70, 80, 90, 79,
                                          r.randint(0, 100)]),),
        "curve": lambda r, p: (_scores(r, p), r.randint(1, 15)),
        "count_passing": lambda r, p: (_scores(r, p),),
        "grade_counts": lambda r, p: (_scores(r, p),),
        "rank": _class,
        "top_students": lambda r, p: (*_class(r, p), r.randint(1, 3)),
        "summary_line": lambda r, p: (r.choice(["math", "art", "physics", "history"]),
                                      _scores(r, p)),
    },
    constants={"PASS_MARK": "the lowest score that passes", "TOP_MARK": "the highest score"},
    renames={"average": "mean_score", "count_passing": "passing_count",
             "letter": "letter_grade", "rank": "ranking"},
)
