"""Template: a day planner (times of day, meetings, free slots)."""
from cursorbench.mini.templates import Template

CLOCK = '''"""Times of day as minutes since midnight."""

DAY_START = $START
DAY_END = $END


def to_minutes(hours, minutes):
    """Minutes since midnight."""
    return hours * 60 + minutes


def format_time(total):
    """'HH:MM' for minutes since midnight."""
    hours = total // 60
    minutes = total % 60
    return f"{hours:02d}:{minutes:02d}"


def duration(start, end):
    """Minutes from start to end; an end before the start is on the next day."""
    if end < start:
        end = end + 24 * 60
    return end - start
'''

SCHEDULE = '''"""Meetings as (start, end) pairs of minutes since midnight."""
from .clock import DAY_END, DAY_START, duration, format_time


def overlaps(a, b):
    """Whether two meetings overlap (touching ends do not)."""
    return a[0] < b[1] and b[0] < a[1]


def merge(meetings):
    """Overlapping or touching meetings merged, sorted by start."""
    merged = []
    for start, end in sorted(meetings):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def free_slots(meetings):
    """Gaps between DAY_START and DAY_END that no meeting covers."""
    slots = []
    cursor = DAY_START
    for start, end in merge(meetings):
        if start > cursor:
            slots.append((cursor, start))
        cursor = max(cursor, end)
    if cursor < DAY_END:
        slots.append((cursor, DAY_END))
    return slots


def busy_minutes(meetings):
    """Total minutes covered by meetings."""
    return sum(duration(start, end) for start, end in merge(meetings))


def agenda(meetings):
    """'HH:MM-HH:MM' for each merged meeting."""
    return [f"{format_time(start)}-{format_time(end)}" for start, end in merge(meetings)]
'''


def _meeting(r, p):
    start = r.randrange(p["START"], p["END"] - 30, 15)
    return (start, min(start + r.choice([15, 30, 45, 60, 90]), p["END"]))


def _meetings(r, p):
    return [_meeting(r, p) for _ in range(r.randint(1, 4))]


TEMPLATE = Template(
    name="timeslots",
    packages=("planner", "calendar_app", "agenda"),
    subsystem="the day planner",
    modules={"clock.py": CLOCK, "schedule.py": SCHEDULE},
    params={"START": (420, 480, 540), "END": (1020, 1080, 1140)},
    inputs={
        "to_minutes": lambda r, p: (r.randint(0, 23), r.randint(0, 59)),
        "format_time": lambda r, p: (r.randint(0, 1439),),
        "duration": lambda r, p: (r.randint(0, 1439), r.randint(0, 1439)),
        "overlaps": lambda r, p: (_meeting(r, p), _meeting(r, p)),
        "merge": lambda r, p: (_meetings(r, p),),
        "free_slots": lambda r, p: (_meetings(r, p),),
        "busy_minutes": lambda r, p: (_meetings(r, p),),
        "agenda": lambda r, p: (_meetings(r, p),),
    },
    constants={"DAY_START": "when the working day starts, in minutes since midnight",
               "DAY_END": "when the working day ends, in minutes since midnight"},
    renames={"duration": "minutes_between", "format_time": "clock_label"},
)
