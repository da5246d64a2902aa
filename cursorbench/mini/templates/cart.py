"""Template: a shopping cart (line prices with a bulk discount, shipping, the final bill)."""
from cursorbench.mini.templates import Template

PRICING = '''"""Prices of cart lines, given as (unit price, quantity) pairs."""

BULK_THRESHOLD = $BULK
BULK_DISCOUNT = $DISCOUNT


def line_total(price, quantity):
    """Unit price times quantity, with the bulk discount once the quantity reaches the
    bulk threshold; rounded to cents."""
    total = price * quantity
    if quantity >= BULK_THRESHOLD:
        total = total * (1 - BULK_DISCOUNT)
    return round(total, 2)


def subtotal(lines):
    """Sum of the line totals."""
    amount = 0
    for price, quantity in lines:
        amount += line_total(price, quantity)
    return round(amount, 2)
'''

CHECKOUT = '''"""Shipping and the amount a customer pays."""
from .pricing import line_total, subtotal

FREE_SHIPPING_OVER = $FREE
SHIPPING_PER_KG = $PER_KG


def shipping_cost(amount, weight_kg):
    """Free above the threshold; otherwise a rate per kilogram, billing at least one."""
    if amount > FREE_SHIPPING_OVER:
        return 0
    billable = max(weight_kg, 1)
    return round(billable * SHIPPING_PER_KG, 2)


def order_total(lines, weight_kg, tax_rate):
    """Subtotal plus tax plus shipping."""
    amount = subtotal(lines)
    tax = amount * tax_rate
    return round(amount + tax + shipping_cost(amount, weight_kg), 2)


def cheapest_line(lines):
    """Index of the line with the lowest total (the first one on ties)."""
    best = 0
    for i in range(1, len(lines)):
        if line_total(lines[i][0], lines[i][1]) < line_total(lines[best][0], lines[best][1]):
            best = i
    return best


def split_bill(total, people):
    """Shares of a bill in cents-rounded amounts that add up to the total; the first
    people pay the leftover cents."""
    cents = round(total * 100)
    share = cents // people
    shares = [share] * people
    for i in range(cents - share * people):
        shares[i] += 1
    return [s / 100 for s in shares]
'''


def _line(r, p):
    quantity = r.choice([p["BULK"], p["BULK"] - 1, r.randint(1, 12)])
    return (round(r.uniform(0.5, 40), 2), quantity)


def _lines(r, p, least=1):
    return [_line(r, p) for _ in range(r.randint(least, 5))]


TEMPLATE = Template(
    name="cart",
    packages=("shop", "cart", "checkout_app", "store"),
    subsystem="the shopping cart and checkout code",
    modules={"pricing.py": PRICING, "checkout.py": CHECKOUT},
    params={"BULK": (5, 6, 8, 10), "DISCOUNT": (0.1, 0.15, 0.2, 0.25), "FREE": (50, 75, 100),
            "PER_KG": (2.5, 3, 4.5)},
    inputs={
        "line_total": _line,
        "subtotal": lambda r, p: (_lines(r, p),),
        "shipping_cost": lambda r, p: (r.choice([p["FREE"], round(r.uniform(5, 150), 2)]),
                                       r.choice([0.5, 1, round(r.uniform(0.2, 6), 1)])),
        "order_total": lambda r, p: (_lines(r, p), round(r.uniform(0.2, 6), 1),
                                     r.choice([0.05, 0.08, 0.2])),
        "cheapest_line": lambda r, p: (_lines(r, p, least=2),),
        "split_bill": lambda r, p: (round(r.uniform(10, 200), 2), r.randint(2, 6)),
    },
    constants={"BULK_THRESHOLD": "the quantity from which the bulk discount applies",
               "BULK_DISCOUNT": "the bulk discount rate",
               "FREE_SHIPPING_OVER": "the order amount above which shipping is free",
               "SHIPPING_PER_KG": "the shipping rate per kilogram"},
    renames={"subtotal": "cart_subtotal", "line_total": "price_of_line"},
)
