"""Template: a warehouse inventory (stock counts, values, reorders in batches)."""
from cursorbench.mini.templates import Template

STOCK = '''"""Stock levels as {item: quantity} dictionaries."""


def merge_counts(first, second):
    """Adds two stock counts item by item."""
    merged = dict(first)
    for item, quantity in second.items():
        merged[item] = merged.get(item, 0) + quantity
    return merged


def stock_value(stock, prices):
    """Total value of the stock at the unit prices, rounded to cents."""
    value = 0
    for item, quantity in stock.items():
        value += quantity * prices[item]
    return round(value, 2)


def remove_items(stock, item, quantity):
    """The stock after taking `quantity` of `item`, never below zero."""
    updated = dict(stock)
    updated[item] = max(updated.get(item, 0) - quantity, 0)
    return updated
'''

REORDER = '''"""Deciding what to order."""
from .stock import merge_counts, stock_value

REORDER_LEVEL = $LEVEL
BATCH_SIZE = $BATCH


def low_items(stock):
    """Items at or below the reorder level, sorted by name."""
    return sorted(item for item, quantity in stock.items() if quantity <= REORDER_LEVEL)


def order_quantity(quantity, target):
    """Units to order to reach `target`, in whole batches; 0 if none are needed."""
    missing = target - quantity
    if missing <= 0:
        return 0
    batches = (missing + BATCH_SIZE - 1) // BATCH_SIZE
    return batches * BATCH_SIZE


def orders(stock, target):
    """{item: units to order} for the low items."""
    return {item: order_quantity(stock[item], target) for item in low_items(stock)}


def restocked_value(stock, prices, target):
    """Value of the stock once the orders for `target` have arrived."""
    return stock_value(merge_counts(stock, orders(stock, target)), prices)
'''

_ITEMS = ("bolts", "nuts", "gears", "belts", "tape", "glue", "pins")


def _stock(r, p):
    items = r.sample(_ITEMS, r.randint(1, 5))
    return {item: r.choice([p["LEVEL"], p["LEVEL"] + 1, r.randint(0, 40)]) for item in items}


def _prices(stock, r):
    return {item: round(r.uniform(0.1, 9), 2) for item in stock}


def _valued(r, p):
    stock = _stock(r, p)
    return stock, _prices(stock, r)


TEMPLATE = Template(
    name="inventory",
    packages=("inventory", "warehouse", "stockroom"),
    subsystem="the inventory code",
    modules={"stock.py": STOCK, "reorder.py": REORDER},
    params={"LEVEL": (3, 5, 8, 10), "BATCH": (6, 10, 12, 25)},
    inputs={
        "merge_counts": lambda r, p: (_stock(r, p), _stock(r, p)),
        "stock_value": _valued,
        "remove_items": lambda r, p: (_stock(r, p), r.choice(_ITEMS), r.randint(1, 20)),
        "low_items": lambda r, p: (_stock(r, p),),
        "order_quantity": lambda r, p: (r.randint(0, 40), r.choice([r.randint(10, 60),
                                                                    p["BATCH"]])),
        "orders": lambda r, p: (_stock(r, p), r.randint(10, 60)),
        "restocked_value": lambda r, p: (*_valued(r, p), r.randint(10, 60)),
    },
    constants={"REORDER_LEVEL": "the quantity at or below which an item is reordered",
               "BATCH_SIZE": "the number of units in one batch of an order"},
    renames={"stock_value": "value_of_stock", "merge_counts": "add_counts"},
)
