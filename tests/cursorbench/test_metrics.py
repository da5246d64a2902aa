import math

import pytest

from cursorbench import metrics


@pytest.mark.parametrize("n, c, k, expected", [
    (5, 2, 1, 2 / 5),
    (5, 2, 2, 1 - 3 / 10),     # 1 - C(3,2)/C(5,2)
    (5, 2, 3, 1 - 1 / 10),     # 1 - C(3,3)/C(5,3)
    (5, 2, 4, 1.0),            # n - c < k: some draw must hold a correct attempt
    (10, 0, 5, 0.0),
    (3, 3, 1, 1.0),
    (20, 3, 10, 1 - math.comb(17, 10) / math.comb(20, 10)),
    (200, 7, 50, 1 - math.comb(193, 50) / math.comb(200, 50)),
])
def test_pass_at_k_matches_hand_computed_values(n, c, k, expected):
    assert metrics.pass_at_k(n, c, k) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("n, c, k", [(3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        metrics.pass_at_k(n, c, k)


def test_bootstrap_ci_brackets_the_mean_and_is_deterministic():
    values = [0.0] * 30 + [1.0] * 70
    low, high = metrics.bootstrap_ci(values)
    assert low < 0.7 < high
    assert 0.5 < low and high < 0.85
    assert metrics.bootstrap_ci(values) == (low, high)
    assert metrics.bootstrap_ci([1.0, 1.0]) == (1.0, 1.0)


def _record(task, attempt, resolved, infra=False, **fields):
    base = {"task_id": task, "attempt": attempt, "resolved": resolved, "infra_failure": infra,
            "category": "debug", "difficulty": "easy", "kind": "bugfix", "prompt_level": "L0",
            "steps": 3, "output_tokens": None, "action_chars": 40, "diff_lines": 2,
            "elapsed_s": 1.0, "reference_lines": 2}
    return {**base, **fields}


def test_summary_scores_excludes_infra_and_breaks_down():
    records = [
        _record("a", 0, True), _record("a", 1, False), _record("a", 2, True),
        _record("b", 0, False), _record("b", 1, False), _record("b", 2, False, infra=True),
        _record("c", 0, False, infra=True), _record("c", 1, False, infra=True),
        _record("c", 2, False, infra=True),
        _record("d", 0, True, category="feature"), _record("d", 1, True, category="feature"),
        _record("d", 2, True, category="feature"),
    ]
    s = metrics.summarize(records, k=3)
    assert s["n_tasks"] == 3                      # c only has infra failures
    assert s["n_tasks_total"] == 4
    assert s["infra_failures"] == 4
    assert s["infra_failure_rate"] == pytest.approx(4 / 12)
    assert s["mean@1"] == pytest.approx((2 / 3 + 0 + 1) / 3)
    # pass@2: a (n=3, c=2) -> 1; b (n=2, c=0) -> 0; d -> 1.
    assert s["pass@k"]["2"] == pytest.approx(2 / 3)
    # pass@3 only counts tasks with 3 scored attempts: a and d.
    assert s["pass@k"]["3"] == pytest.approx(1.0)
    assert s["best_of_k"] == pytest.approx(2 / 3)
    # attempt accuracies: 0: a,b,d -> 2/3; 1: a,b,d -> 1/3; 2: a,d -> 1.
    assert s["mean@K"] == pytest.approx((2 / 3 + 1 / 3 + 1) / 3)
    assert s["mean@K_std"] > 0
    assert s["breakdowns"]["category"]["feature"]["mean@1"] == 1.0
    assert s["breakdowns"]["category"]["debug"]["n_tasks"] == 2


def test_summary_keeps_the_latest_record_of_a_rerun_attempt():
    records = [_record("a", 0, False, infra=True), _record("a", 0, True),
               _record("a", 5, False)]            # attempt 5 is beyond k
    s = metrics.summarize(records, k=1)
    assert s["mean@1"] == 1.0 and s["infra_failures"] == 0 and s["n_attempts"] == 1
