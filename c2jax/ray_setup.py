"""Starting or joining Ray the way every c2jax part does (RL actor fleets, sweeps, benchmarks).

A local Ray (no address) is a single-node cluster that binds only the loopback address, with a
fresh random auth token (only processes started from here inherit it), a bounded number of
CPUs and no usage stats. An address joins an existing cluster; its own settings apply (export
RAY_AUTH_MODE=token and the cluster's RAY_AUTH_TOKEN before starting).
"""
import os
import secrets
import sys


def init_ray(address: str = "", *, num_cpus: int = 2, object_store_mb: int = 0):
    """Ray, initialised here unless it already is. Returns (ray, whether this call started it).

    object_store_mb: the local object store's size (0 = Ray's default); ignored with an address.
    """
    if not address:
        # Ray reads these when it is imported (and `_reload_settings` when it already was).
        os.environ.setdefault("RAY_AUTH_MODE", "token")
        os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        # Ray's single-node mode: every server binds the loopback address (by default Ray
        # replaces 127.0.0.1 with the host's network address).
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    if "ray" in sys.modules:
        _reload_settings()
    import ray
    if ray.is_initialized():
        return ray, False
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        extra = {"object_store_memory": object_store_mb << 20} if object_store_mb else {}
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, **extra)
    return ray, True


def _reload_settings() -> None:
    """Ray reads its auth and cluster settings when it is imported; when the caller imported
    it earlier, reload them the way Ray's own test utilities do
    (`ray._private.authentication_test_utils`)."""
    from ray._private import ray_constants
    from ray._raylet import AuthenticationTokenLoader, Config
    ray_constants.ENABLE_RAY_CLUSTER = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER",
                                                      "1") != "0"
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
