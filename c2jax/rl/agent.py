"""The policy as a benchmark agent: the RL actor's episode loop behind cursorbench's agent
interface, so evaluation runs exactly the behaviour that is trained.

    factory = model_agent_factory("runs/rl_tiny")     # `cursorbench.run --agent=model:CKPT`
    factory = policy_agent_factory(server, template, settings)   # an engine you already have
    agent = factory(seed)                             # one agent per attempt

Each agent is an episode agent (`run(env, task, observation, info)`): it renders the
conversation with the chat template, token-in/token-out; samples each turn until `<|end|>`;
hands the text to the environment, which parses the tool call (a malformed call comes back as
an error observation and the episode goes on); and applies the rollout's context strategy
when a turn would not fit (`summarise`, `truncate`, or `stop`: end with `finish`). All agents
of one factory share one `GenerationServer`, so a harness's concurrent attempts decode in one
continuous batch.
"""
from __future__ import annotations

from typing import Any

from environments import tool_format

from c2jax.data.chat import ChatTemplate
from c2jax.rl.rollout import RolloutSettings, _Episode
from c2jax.sampling import Engine, GenerationServer, sampler_config


def assistant_message(text: str) -> dict[str, Any]:
    """A sampled assistant turn as a chat message: its text and, when it parses, its call."""
    cut = text.find(tool_format.TOOL_CALL)
    content = text if cut < 0 else text[:cut]
    message: dict[str, Any] = {"role": "assistant",
                               "content": content.removesuffix(tool_format.END)}
    try:
        tool, args = tool_format.parse_tool_call(text)
    except tool_format.ToolCallError:
        return message
    message["tool_call"] = {"tool": tool, "args": args}
    return message


class PolicyAgent:
    """An episode agent sampling from `server` (see the module docstring)."""

    def __init__(self, server: GenerationServer, template: ChatTemplate,
                 settings: RolloutSettings, seed: int):
        self.server, self.template, self.settings, self.seed = server, template, settings, seed
        self.messages: list[dict[str, Any]] = []
        self.summaries = 0

    def run(self, env, task, observation: dict[str, Any], info: dict[str, Any]) -> None:
        episode = _Episode(env, self.server, self.template, task, self.seed, 0, 0,
                           self.settings)
        episode.begin(observation, info)
        self.messages = [{"role": "system", "content": info["system_prompt"]},
                         {"role": "user", "content": observation["content"]}]
        try:
            episode.run()
        finally:
            for action, answer in zip(episode.actions, episode.observations + [None]):
                self.messages.append(assistant_message(action["text"]) if "text" in action
                                     else {"role": "assistant", "content": "",
                                           "tool_call": action})
                if answer is not None:
                    self.messages.append({"role": "tool", "content": answer})
            self.summaries = episode.summaries


def policy_agent_factory(server: GenerationServer, template: ChatTemplate,
                         settings: RolloutSettings):
    """`seed -> PolicyAgent` over an existing server."""
    return lambda seed: PolicyAgent(server, template, settings, seed)


def model_agent_factory(checkpoint: str, *, slots: int = 8, max_len: int = 2048,
                        max_new_tokens: int = 256, temperature: float = 0.0,
                        top_p: float = 1.0, context: str = "summarise"):
    """A factory `seed -> PolicyAgent` over the model in `checkpoint` (a training workdir, a
    checkpoint step directory or a model directory with its tokenizer.json)."""
    from c2jax.train.checkpoint import load_trained_model

    cfg, variables, tokenizer = load_trained_model(checkpoint)
    if tokenizer is None:
        raise FileNotFoundError(f"{checkpoint} has no tokenizer.json: the agent needs the "
                                "model's tokenizer to render the conversation")
    engine = Engine(cfg, variables, tokenizer=tokenizer,
                    config=sampler_config(slots=slots, max_len=max_len))
    settings = RolloutSettings(max_len=max_len, max_new_tokens=max_new_tokens,
                               temperature=temperature, top_p=top_p, context=context)
    factory = policy_agent_factory(GenerationServer(engine), ChatTemplate(tokenizer), settings)
    return factory
