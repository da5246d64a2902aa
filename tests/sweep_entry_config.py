"""The config of tests/sweep_entry.py (what the sweep tests vary)."""
import ml_collections


def get_config(arg=None):
    del arg
    return ml_collections.ConfigDict(dict(x=0.0, y=1, flag=False, fail_above=100.0))
