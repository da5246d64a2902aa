"""Template: recipes (scaling, weights, a shopping list in packs)."""
from cursorbench.mini.templates import Template

SCALE = '''"""Recipes as {ingredient: grams} for a number of servings."""


def scale(recipe, servings, wanted):
    """Quantities for `wanted` servings, rounded to whole grams."""
    factor = wanted / servings
    return {name: round(grams * factor) for name, grams in recipe.items()}


def heaviest_ingredient(recipe):
    """The ingredient with the most grams (the first in name order on ties)."""
    best = None
    for name in sorted(recipe):
        if best is None or recipe[name] > recipe[best]:
            best = name
    return best


def total_weight(recipe):
    """Sum of the grams."""
    return sum(recipe.values())
'''

SHOPPING = '''"""Turning recipes into a shopping list."""
from .scale import scale, total_weight

PACK_GRAMS = $PACK


def combine(recipes):
    """Grams of each ingredient over several recipes."""
    needed = {}
    for recipe in recipes:
        for name, grams in recipe.items():
            needed[name] = needed.get(name, 0) + grams
    return needed


def packs_needed(grams):
    """Packs of PACK_GRAMS to buy, rounded up."""
    return (grams + PACK_GRAMS - 1) // PACK_GRAMS


def shopping_list(recipes):
    """Sorted (ingredient, packs) pairs for all the recipes."""
    needed = combine(recipes)
    return [(name, packs_needed(needed[name])) for name in sorted(needed)]


def cost_per_serving(recipe, servings, price_per_kg):
    """Cost of one serving when every ingredient costs `price_per_kg`, rounded to cents."""
    grams = total_weight(scale(recipe, servings, 1))
    return round(grams / 1000 * price_per_kg, 2)
'''

_INGREDIENTS = ("flour", "sugar", "butter", "eggs", "milk", "rice", "oats", "salt")


def _recipe(r, p):
    return {name: r.choice([p["PACK"], r.randint(5, 600)])
            for name in r.sample(_INGREDIENTS, r.randint(1, 5))}


TEMPLATE = Template(
    name="recipes",
    packages=("kitchen", "recipes", "cookbook"),
    subsystem="the recipe tools",
    modules={"scale.py": SCALE, "shopping.py": SHOPPING},
    params={"PACK": (250, 500, 1000)},
    inputs={
        "scale": lambda r, p: (_recipe(r, p), r.randint(1, 8), r.randint(1, 12)),
        "heaviest_ingredient": lambda r, p: (_recipe(r, p),),
        "total_weight": lambda r, p: (_recipe(r, p),),
        "combine": lambda r, p: ([_recipe(r, p) for _ in range(r.randint(1, 3))],),
        "packs_needed": lambda r, p: (r.choice([p["PACK"], p["PACK"] + 1, r.randint(1, 3000)]),),
        "shopping_list": lambda r, p: ([_recipe(r, p) for _ in range(r.randint(1, 3))],),
        "cost_per_serving": lambda r, p: (_recipe(r, p), r.randint(1, 8),
                                          r.choice([2, 5, 12.5])),
    },
    constants={"PACK_GRAMS": "the number of grams in one pack"},
    renames={"scale": "scale_recipe", "total_weight": "recipe_weight"},
)
