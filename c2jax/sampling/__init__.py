"""Batched generation: an MLA latent KV cache, continuous batching, per-token records
(logprob, policy version, routed experts), in-flight weight swaps and MTP speculative decoding.

    engine = Engine(cfg, variables, config=sampler_config(slots=16, max_len=1024))
    generations = c2jax.generate(cfg, variables, prompts, max_new_tokens=64, temperature=0.7)

See docs/sampling.md.
"""
from c2jax.sampling.config import sampler_config
from c2jax.sampling.engine import Engine, Generation, Request, bucket
from c2jax.sampling.server import GenerationServer

__all__ = ["Engine", "Generation", "GenerationServer", "Request", "bucket", "generate",
           "sampler_config"]


def generate(cfg, params, prompts, max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int = 0, top_p: float = 1.0, seed: int = 0, stop_tokens=(),
             stop_strings=(), tokenizer=None, speculative: bool = False, slots: int = 0,
             mesh=None, rules=None) -> list[Generation]:
    """Continues every prompt (a list of token ids) by up to `max_new_tokens` tokens.

    params: the model's variables {"params", "router_bias"}. Prompt i draws with seed
    `seed + i`, so equal prompts give independent samples. slots: sequences decoded together
    (default: all prompts, at most 16). Returns one `Generation` per prompt, in order: the new
    token ids and, per token, the log-probability under the sampling distribution, the policy
    version (0) and the experts chosen in every MoE layer.
    """
    prompts = [list(p) for p in prompts]
    if not prompts:
        return []
    longest = max(len(p) for p in prompts) + int(max_new_tokens)
    config = sampler_config(slots=slots or min(len(prompts), 16),
                            max_len=bucket(longest, 16, 1 << 30), speculative=speculative)
    engine = Engine(cfg, params, config=config, tokenizer=tokenizer, mesh=mesh, rules=rules)
    return engine.generate([dict(prompt=p, max_new_tokens=max_new_tokens,
                                 temperature=temperature, top_k=top_k, top_p=top_p,
                                 seed=seed + i, stop_tokens=stop_tokens,
                                 stop_strings=stop_strings) for i, p in enumerate(prompts)])
