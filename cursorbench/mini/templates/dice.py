"""Template: a dice game (face counts, straights, pairs, scores, a leaderboard)."""
from cursorbench.mini.templates import Template

DICE = '''"""Rolls of six-sided dice, as lists of faces 1-6."""

SIDES = 6


def counts(roll):
    """How many dice show each face, as a list indexed by face - 1."""
    tally = [0] * SIDES
    for face in roll:
        tally[face - 1] += 1
    return tally


def is_straight(roll):
    """Whether the dice show five consecutive faces."""
    faces = sorted(set(roll))
    return len(faces) == 5 and faces[-1] - faces[0] == 4


def best_pair(roll):
    """The highest face shown at least twice; 0 if none is."""
    tally = counts(roll)
    for face in range(SIDES, 0, -1):
        if tally[face - 1] >= 2:
            return face
    return 0
'''

SCORING = '''"""Scoring rounds and ranking players."""
from .dice import best_pair, counts, is_straight

STRAIGHT_SCORE = $STRAIGHT
BONUS_THRESHOLD = $THRESHOLD
BONUS = $BONUS


def score_roll(roll):
    """A straight scores STRAIGHT_SCORE; otherwise the faces shown three or more times
    count in full, plus twice the best pair."""
    if is_straight(roll):
        return STRAIGHT_SCORE
    tally = counts(roll)
    score = 0
    for face in range(1, len(tally) + 1):
        if tally[face - 1] >= 3:
            score += face * tally[face - 1]
    return score + 2 * best_pair(roll)


def total_with_bonus(rolls):
    """Sum of the roll scores, plus the bonus once that sum reaches the threshold."""
    total = sum(score_roll(roll) for roll in rolls)
    if total >= BONUS_THRESHOLD:
        total += BONUS
    return total


def leaderboard(players):
    """(name, total) pairs, highest total first, then by name."""
    rows = [(name, total_with_bonus(rolls)) for name, rolls in players.items()]
    return sorted(rows, key=lambda row: (-row[1], row[0]))
'''


def _roll(r, p):
    if r.random() < 0.2:
        start = r.randint(1, 2)
        roll = list(range(start, start + 5))
        r.shuffle(roll)
        return roll
    return [r.randint(1, 6) for _ in range(5)]


def _rolls(r, p):
    return [_roll(r, p) for _ in range(r.randint(1, 4))]


TEMPLATE = Template(
    name="dice",
    packages=("dicegame", "yams", "rollers"),
    subsystem="the dice game scoring",
    modules={"dice.py": DICE, "scoring.py": SCORING},
    params={"STRAIGHT": (30, 40, 50), "THRESHOLD": (40, 60, 80), "BONUS": (10, 25, 35)},
    inputs={
        "counts": lambda r, p: (_roll(r, p),),
        "is_straight": lambda r, p: (_roll(r, p),),
        "best_pair": lambda r, p: (_roll(r, p),),
        "score_roll": lambda r, p: (_roll(r, p),),
        "total_with_bonus": lambda r, p: (_rolls(r, p),),
        "leaderboard": lambda r, p: ({name: _rolls(r, p) for name in
                                      r.sample(["ann", "bo", "cy", "di", "ed"], 3)},),
    },
    constants={"SIDES": "the number of faces of a die",
               "STRAIGHT_SCORE": "the score of a straight",
               "BONUS_THRESHOLD": "the total from which the bonus is paid",
               "BONUS": "the size of the bonus"},
    renames={"counts": "face_counts", "best_pair": "highest_pair",
             "is_straight": "has_straight"},
)
