"""Template: library loans (due days, late days, fines, reminders)."""
from cursorbench.mini.templates import Template

LOANS = '''"""Loans; days are numbered from the library's opening day."""

LOAN_DAYS = $DAYS


def due_day(borrowed):
    """The day a loan is due back."""
    return borrowed + LOAN_DAYS


def days_late(borrowed, returned):
    """Days past the due day; 0 when returned in time."""
    late = returned - due_day(borrowed)
    return max(late, 0)


def on_loan(loans, day):
    """Titles of the (title, borrowed, returned) loans that are out on `day`: borrowed on
    or before it and not yet returned (returned is None while a book is out)."""
    titles = []
    for title, borrowed, returned in loans:
        if borrowed <= day and (returned is None or returned > day):
            titles.append(title)
    return titles
'''

FINES = '''"""Fines for late returns."""
from .loans import days_late, due_day

DAILY_FINE = $FINE
MAX_FINE = $MAX_FINE
GRACE_DAYS = $GRACE


def fine(borrowed, returned):
    """DAILY_FINE per late day beyond the grace days, capped at MAX_FINE, in cents-rounded
    units."""
    late = days_late(borrowed, returned) - GRACE_DAYS
    if late <= 0:
        return 0
    return round(min(late * DAILY_FINE, MAX_FINE), 2)


def total_fines(loans):
    """Sum of the fines of the returned loans."""
    total = 0
    for title, borrowed, returned in loans:
        if returned is not None:
            total += fine(borrowed, returned)
    return round(total, 2)


def worst_offender(loans):
    """Title of the returned loan with the most late days; '' if none was late."""
    worst = ""
    most = 0
    for title, borrowed, returned in loans:
        if returned is not None and days_late(borrowed, returned) > most:
            most = days_late(borrowed, returned)
            worst = title
    return worst


def due_reminders(loans, day):
    """Titles still out whose due day is `day`."""
    return [title for title, borrowed, returned in loans
            if returned is None and due_day(borrowed) == day]
'''

_TITLES = ("dune", "emma", "ulysses", "beloved", "hamlet", "walden", "ivanhoe")


def _loans(r, p, day=None):
    loans = []
    for title in r.sample(_TITLES, r.randint(1, 5)):
        borrowed = r.randint(0, 30)
        returned = r.choice([None, borrowed + r.randint(0, 3 * p["DAYS"]),
                             borrowed + p["DAYS"] + p["GRACE"]])
        loans.append((title, borrowed, returned))
    return loans


def _late(r, p):
    borrowed = r.randint(0, 30)
    return borrowed, borrowed + r.choice([p["DAYS"], p["DAYS"] + p["GRACE"],
                                          p["DAYS"] + p["GRACE"] + 1, r.randint(0, 60)])


TEMPLATE = Template(
    name="library",
    packages=("library", "loans_app", "circulation"),
    subsystem="the library loans code",
    modules={"loans.py": LOANS, "fines.py": FINES},
    params={"DAYS": (14, 21, 28), "FINE": (0.25, 0.5, 1), "MAX_FINE": (5, 10, 20),
            "GRACE": (0, 1, 2, 3)},
    inputs={
        "due_day": lambda r, p: (r.randint(0, 100),),
        "days_late": _late,
        "on_loan": lambda r, p: (_loans(r, p), r.randint(0, 60)),
        "fine": _late,
        "total_fines": lambda r, p: (_loans(r, p),),
        "worst_offender": lambda r, p: (_loans(r, p),),
        "due_reminders": lambda r, p: ((loans := _loans(r, p)),
                                       r.choice([loans[0][1] + p["DAYS"], r.randint(0, 60)])),
    },
    constants={"LOAN_DAYS": "the length of a loan in days",
               "DAILY_FINE": "the fine per late day",
               "MAX_FINE": "the most one late return can be fined",
               "GRACE_DAYS": "the number of late days that are forgiven"},
    renames={"days_late": "late_days", "due_day": "due_date"},
)
