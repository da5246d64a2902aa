"""Template: weather records (unit conversion, wind chill, daily summaries)."""
from cursorbench.mini.templates import Template

CONVERT = '''"""Temperature units and how cold it feels."""

WIND_STEP = $STEP


def to_fahrenheit(celsius):
    """Celsius to Fahrenheit, rounded to one decimal."""
    return round(celsius * 9 / 5 + 32, 1)


def to_celsius(fahrenheit):
    """Fahrenheit to Celsius, rounded to one decimal."""
    return round((fahrenheit - 32) * 5 / 9, 1)


def feels_like(celsius, wind_kmh):
    """Below 10 degrees, one degree colder for every WIND_STEP km/h of wind."""
    if celsius >= 10:
        return celsius
    return celsius - wind_kmh // WIND_STEP
'''

FORECAST = '''"""Summaries of daily temperatures in Celsius."""
from .convert import feels_like, to_fahrenheit

FROST_BELOW = $FROST


def daily_range(highs, lows):
    """High minus low, day by day."""
    return [high - low for high, low in zip(highs, lows)]


def moving_average(values, window):
    """Mean of every run of `window` consecutive values, rounded to one decimal."""
    averages = []
    for start in range(len(values) - window + 1):
        chunk = values[start:start + window]
        averages.append(round(sum(chunk) / window, 1))
    return averages


def frost_days(lows):
    """Indices of the days whose low is below the frost threshold."""
    return [day for day, low in enumerate(lows) if low < FROST_BELOW]


def warmest_day_fahrenheit(highs):
    """The warmest high, in Fahrenheit."""
    warmest = highs[0]
    for high in highs[1:]:
        if high > warmest:
            warmest = high
    return to_fahrenheit(warmest)


def coldest_feel(lows, winds):
    """The lowest felt temperature over the days."""
    felt = [feels_like(low, wind) for low, wind in zip(lows, winds)]
    return min(felt)
'''


def _temps(r, n):
    return [r.randint(-15, 35) for _ in range(n)]


def _days(r, p):
    n = r.randint(2, 7)
    lows = [r.choice([p["FROST"], r.randint(-15, 15)]) for _ in range(n)]
    return [low + r.randint(0, 15) for low in lows], lows


TEMPLATE = Template(
    name="weather",
    packages=("weather", "forecast_app", "meteo"),
    subsystem="the weather summaries",
    modules={"convert.py": CONVERT, "forecast.py": FORECAST},
    params={"STEP": (5, 8, 10), "FROST": (0, 1, 2)},
    inputs={
        "to_fahrenheit": lambda r, p: (r.randint(-30, 40),),
        "to_celsius": lambda r, p: (r.randint(-20, 104),),
        "feels_like": lambda r, p: (r.choice([10, 9, r.randint(-20, 25)]), r.randint(0, 60)),
        "daily_range": _days,
        "moving_average": lambda r, p: (_temps(r, r.randint(3, 8)), r.randint(1, 3)),
        "frost_days": lambda r, p: (_days(r, p)[1],),
        "warmest_day_fahrenheit": lambda r, p: (_temps(r, r.randint(1, 6)),),
        "coldest_feel": lambda r, p: (_temps(r, 4), [r.randint(0, 60) for _ in range(4)]),
    },
    constants={"WIND_STEP": "the wind speed in km/h that makes it feel one degree colder",
               "FROST_BELOW": "the temperature below which a day counts as a frost day"},
    renames={"to_fahrenheit": "celsius_to_fahrenheit", "feels_like": "wind_chill"},
)
