"""Template: a bank account (ledger, overdraft fees, compound interest)."""
from cursorbench.mini.templates import Template

LEDGER = '''"""Account transactions: positive amounts are deposits, negative ones withdrawals."""

OVERDRAFT_FEE = $FEE


def balance(transactions):
    """The balance after all transactions, starting from zero."""
    total = 0
    for amount in transactions:
        total += amount
    return total


def apply_fees(transactions):
    """The transactions with an overdraft fee (a negative amount) after each one that leaves
    the balance below zero."""
    result = []
    running = 0
    for amount in transactions:
        result.append(amount)
        running += amount
        if running < 0:
            result.append(-OVERDRAFT_FEE)
            running -= OVERDRAFT_FEE
    return result


def largest_withdrawal(transactions):
    """The largest withdrawal as a positive number; 0 if there is none."""
    largest = 0
    for amount in transactions:
        if amount < 0 and -amount > largest:
            largest = -amount
    return largest
'''

INTEREST = '''"""Interest on savings and the cost of overdrafts."""
from .ledger import apply_fees, balance

YEARLY_RATE = $RATE


def compound(principal, years):
    """The principal after `years` of yearly compounding, rounded to cents."""
    amount = principal
    for _ in range(years):
        amount = amount * (1 + YEARLY_RATE)
    return round(amount, 2)


def years_to_double(rate):
    """Whole years of compounding at `rate` until the amount at least doubles (at most 100)."""
    amount = 1.0
    for year in range(1, 101):
        amount = amount * (1 + rate)
        if amount >= 2:
            return year
    return 100


def projected_balance(transactions, years):
    """The balance after the transactions, compounded for `years`."""
    return compound(balance(transactions), years)


def fees_paid(transactions):
    """Total overdraft fees the transactions incur."""
    return balance(transactions) - balance(apply_fees(transactions))
'''


def _transactions(r, p):
    return [r.choice([-1, 1]) * r.randint(1, 120) for _ in range(r.randint(1, 7))]


TEMPLATE = Template(
    name="bank",
    packages=("bank", "ledger_app", "savings"),
    subsystem="the account and interest code",
    modules={"ledger.py": LEDGER, "interest.py": INTEREST},
    params={"FEE": (5, 10, 15, 25), "RATE": (0.02, 0.03, 0.05, 0.08)},
    inputs={
        "balance": lambda r, p: (_transactions(r, p),),
        "apply_fees": lambda r, p: (_transactions(r, p),),
        "largest_withdrawal": lambda r, p: (_transactions(r, p),),
        "compound": lambda r, p: (r.randint(100, 5000), r.randint(0, 12)),
        "years_to_double": lambda r, p: (r.choice([0.01, 0.03, 0.05, 0.07, 0.1, 0.2, 0.5]),),
        "projected_balance": lambda r, p: (_transactions(r, p), r.randint(1, 10)),
        "fees_paid": lambda r, p: (_transactions(r, p),),
    },
    constants={"OVERDRAFT_FEE": "the fee charged when the balance goes below zero",
               "YEARLY_RATE": "the yearly interest rate on savings"},
    renames={"balance": "net_balance", "apply_fees": "with_overdraft_fees"},
)
