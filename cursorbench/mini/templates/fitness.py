"""Template: running training (paces, weekly plans, heart-rate zones)."""
from cursorbench.mini.templates import Template

PACE = '''"""Running paces in seconds per kilometre."""


def pace(seconds, km):
    """Seconds per kilometre, rounded to whole seconds."""
    return round(seconds / km)


def format_pace(seconds_per_km):
    """'M:SS' per kilometre."""
    minutes = seconds_per_km // 60
    seconds = seconds_per_km % 60
    return f"{minutes}:{seconds:02d}"


def finish_time(seconds_per_km, km):
    """Total seconds for `km` kilometres at the pace."""
    return seconds_per_km * km
'''

PLAN = '''"""Weekly training plans."""
from .pace import finish_time, pace

WEEKLY_INCREASE = $INCREASE
LONG_RUN_SHARE = $SHARE
RACE_FACTOR = $FACTOR


def weekly_distances(start_km, weeks):
    """Each week's distance, growing by WEEKLY_INCREASE (a fraction) a week, one decimal."""
    distances = []
    distance = start_km
    for _ in range(weeks):
        distances.append(round(distance, 1))
        distance = distance * (1 + WEEKLY_INCREASE)
    return distances


def long_run(week_km):
    """The week's long run: LONG_RUN_SHARE of its distance, one decimal."""
    return round(week_km * LONG_RUN_SHARE, 1)


def heart_zone(bpm, max_bpm):
    """Training zone 1-5 from the heart rate as a share of the maximum."""
    share = bpm / max_bpm
    if share < 0.6:
        return 1
    if share < 0.7:
        return 2
    if share < 0.8:
        return 3
    if share < 0.9:
        return 4
    return 5


def race_prediction(seconds, km, race_km):
    """Race seconds predicted from a recent run: its pace over the race distance, slowed by
    RACE_FACTOR."""
    return round(finish_time(pace(seconds, km), race_km) * RACE_FACTOR)
'''

TEMPLATE = Template(
    name="fitness",
    packages=("running", "trainer", "fitplan"),
    subsystem="the training planner",
    modules={"pace.py": PACE, "plan.py": PLAN},
    params={"INCREASE": (0.05, 0.1, 0.15), "SHARE": (0.3, 0.35, 0.4),
            "FACTOR": (1.03, 1.05, 1.08)},
    inputs={
        "pace": lambda r, p: (r.randint(900, 4000), r.randint(3, 12)),
        "format_pace": lambda r, p: (r.randint(180, 600),),
        "finish_time": lambda r, p: (r.randint(180, 600), r.randint(1, 42)),
        "weekly_distances": lambda r, p: (r.randint(10, 40), r.randint(1, 6)),
        "long_run": lambda r, p: (r.randint(10, 80),),
        "heart_zone": lambda r, p: (r.randint(90, 200), r.choice([180, 190, 200])),
        "race_prediction": lambda r, p: (r.randint(900, 4000), r.randint(3, 12),
                                         r.choice([5, 10, 21])),
    },
    constants={"WEEKLY_INCREASE": "the weekly growth of the running distance",
               "LONG_RUN_SHARE": "the share of the week's distance run in the long run",
               "RACE_FACTOR": "the factor by which a predicted race is slower than training"},
    renames={"pace": "pace_per_km", "finish_time": "time_for_distance"},
)
