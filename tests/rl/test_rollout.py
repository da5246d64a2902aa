"""Episodes are token-in/token-out: the recorded context is exactly the model's input, the
loss mask covers exactly what was sampled, and the records match the sampler's
(c2jax/rl/rollout.py)."""
import numpy as np
import pytest

from c2jax.rl.rollout import FORCED_FINISH, RolloutSettings, run_episode
from tests.rl.toy_envs import DigitsEnv, toy_tasks


def episode(server, template, *, max_steps=3, **settings):
    fields = dict(max_len=256, max_new_tokens=12, temperature=1.0)
    fields.update(settings)
    (task,) = toy_tasks(1, max_steps=max_steps)
    return run_episode(DigitsEnv(), server, template, task, seed=5, group_id=2, sample=1,
                       settings=RolloutSettings(**fields))


def test_multi_turn_context_is_the_token_stream_the_model_saw(server, template, tokenizer):
    ep = episode(server, template)
    assert not ep.infra_failure and ep.turns == 3 and len(ep.segments) == 1
    (seg,) = ep.segments
    header = template.render([{"role": "system", "content": DigitsEnv.system_prompt},
                              {"role": "user", "content": "Task 0: write digits."}]).ids
    assert seg.tokens[:len(header)].tolist() == header
    assert seg.loss_mask[:len(header)].sum() == 0
    # Every sampled turn is the text the env received, and the tool answers are loss 0.
    sampled_runs = np.split(seg.tokens, np.flatnonzero(np.diff(seg.loss_mask) != 0) + 1)
    masks = np.split(seg.loss_mask, np.flatnonzero(np.diff(seg.loss_mask) != 0) + 1)
    turns = [run.tolist() for run, m in zip(sampled_runs, masks) if m[0] == 1]
    assert [tokenizer.decode(t) for t in turns] == [a["text"] for a in ep.actions]
    assert "ok 1" in tokenizer.decode(seg.tokens.tolist())
    assert np.all(seg.logprobs[seg.loss_mask == 0] == 0)
    assert np.all(seg.logprobs[seg.loss_mask == 1] < 0)
    assert np.all(seg.versions[seg.loss_mask == 1] == 0)
    assert seg.routing.shape == (len(seg), 1, 2)


def test_recorded_logprobs_and_routing_match_the_sampler(server, template, policy):
    """The rows the learner will see reproduce the behaviour log-probs under the same params."""
    import jax
    import jax.numpy as jnp
    from c2jax.model import apply
    from c2jax.sampling.engine import inference_config
    cfg, variables = policy
    ep = episode(server, template, max_steps=2)
    (seg,) = ep.segments
    replay = seg.routing[:-1].transpose(1, 0, 2)[:, None]        # [moe_layers, 1, n - 1, k]
    logits, _ = apply(variables, jnp.asarray(seg.tokens[None, :-1]), cfg=inference_config(cfg),
                      routing=jnp.asarray(replay))
    logp = jax.nn.log_softmax(logits[0])[jnp.arange(len(seg) - 1), seg.tokens[1:]]
    trained = seg.loss_mask[1:] == 1
    np.testing.assert_allclose(np.asarray(logp)[trained], seg.logprobs[1:][trained], atol=2e-4)


@pytest.mark.parametrize("strategy", ["summarise", "truncate"])
def test_context_strategies_start_new_segments(server, template, tokenizer, strategy):
    ep = episode(server, template, max_steps=12, context=strategy, context_budget=150,
                 max_new_tokens=10, summary_max_tokens=12)
    assert not ep.infra_failure, ep.error
    assert len(ep.segments) >= 2 and all(len(s) <= 256 for s in ep.segments)
    header_len = int(np.argmax(ep.segments[0].loss_mask))   # up to the first sampled token
    header = ep.segments[0].tokens[:header_len - 1].tolist()  # without "<|assistant|>"
    for before, after in zip(ep.segments, ep.segments[1:]):
        assert after.tokens[:len(header)].tolist() == header
        if strategy == "summarise":
            assert before.kind == "summary" and ep.summaries >= 1
            # The summary is trained in its own segment and is plain context (loss 0) after.
            summary = before.tokens[before.loss_mask == 1][-3:].tolist()
            assert after.loss_mask[:len(header) + 2 + 12 + 2].sum() == 0
            assert summary[-1] in after.tokens.tolist()
        else:
            assert before.kind == "truncated" and ep.truncations >= 1
    assert ep.turns == 12 + ep.summaries


def test_a_snapshot_resumes_by_replaying_the_environment(server, template):
    (task,) = toy_tasks(1, max_steps=4)
    settings = RolloutSettings(max_len=256, max_new_tokens=8, temperature=1.0)
    snapshots = []
    full = run_episode(DigitsEnv(), server, template, task, seed=9, group_id=0, sample=0,
                       settings=settings, on_boundary=snapshots.append)
    assert len(snapshots) == 3
    resumed = run_episode(DigitsEnv(), server, template, task, seed=9, group_id=0, sample=0,
                          settings=settings, resume=snapshots[1])
    assert not resumed.infra_failure, resumed.error
    assert resumed.actions[:2] == full.actions[:2] and len(resumed.actions) == 4
    assert resumed.segments[0].tokens[:len(snapshots[1]["ctx"]["tokens"])].tolist() == \
        snapshots[1]["ctx"]["tokens"]
    # A log that no longer matches the environment is refused, not silently continued.
    bad = dict(snapshots[1], observations=["something else"] * 2)
    broken = run_episode(DigitsEnv(), server, template, task, seed=9, group_id=0, sample=0,
                         settings=settings, resume=bad)
    assert broken.infra_failure and "diverged" in broken.error


def test_max_turns_ends_the_episode_with_finish(server, template):
    ep = episode(server, template, max_steps=6, max_turns=2)
    assert ep.turns == 2 and len(ep.actions) == 3
    assert ep.actions[-1] == FORCED_FINISH


def test_an_environment_error_is_an_infra_failure_not_a_crash(server, template):
    class Broken(DigitsEnv):
        def step(self, action):
            raise OSError("sandbox vanished")

    (task,) = toy_tasks(1)
    ep = run_episode(Broken(), server, template, task, seed=1, group_id=0, sample=0,
                     settings=RolloutSettings(max_len=256, max_new_tokens=4))
    assert ep.infra_failure and "sandbox vanished" in ep.error
