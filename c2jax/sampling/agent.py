"""A model-backed coding agent: the sampler behind the environment's step-agent interface.

    factory = model_agent_factory("runs/rl_tiny")     # what `cursorbench.run --agent=model:CKPT`
    agent = factory(seed)                             # one agent per attempt
    agent.begin(task, observation, info); action = agent.act(observation, info)

Each turn appends the observation to the conversation's token ids with the chat template
(token-in/token-out: nothing already in the context is re-tokenised), opens an assistant turn,
samples until `<|end|>`, and hands the decoded text to the environment, which parses the tool
call; a malformed call comes back from the environment as an error observation and the episode
goes on. When the next turn would not fit in the sampler's context (`max_len`), the agent ends
the episode with `finish` rather than truncating its history (RL uses self-summarisation
instead, c2jax/rl).

Agents built by one factory share one `GenerationServer`, so the harness's concurrent attempts
are decoded in one continuous batch.
"""
from __future__ import annotations

from typing import Any

from environments import tool_format

from c2jax.data.chat import ChatTemplate
from c2jax.sampling.server import GenerationServer

#: The summary of the `finish` that ends an episode whose next turn would not fit the context.
CONTEXT_FULL_SUMMARY = "stopped: the conversation reached the model's context limit"


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


class ModelAgent:
    """A step agent (`environments.Agent`) that samples each action from the model.

    server: the generation server; template: the chat template of the model's tokenizer;
    max_new_tokens: per assistant turn; temperature / top_p: sampling; seed: this attempt's
    draws (turn t samples with seed `seed * 1_000_003 + t`).
    """

    def __init__(self, server: GenerationServer, template: ChatTemplate, *,
                 max_new_tokens: int = 256, temperature: float = 0.0, top_p: float = 1.0,
                 seed: int = 0):
        self.server, self.template = server, template
        self.max_new_tokens, self.temperature, self.top_p = max_new_tokens, temperature, top_p
        self.seed = seed
        self.messages: list[dict[str, Any]] = []
        self.chat = None
        self._turn = 0

    def begin(self, task, observation: dict[str, Any], info: dict[str, Any]) -> None:
        self.messages = [{"role": "system", "content": info["system_prompt"]},
                         {"role": "user", "content": observation["content"]}]
        self.chat = self.template.render(self.messages)
        self._turn = 0

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
        if observation["role"] == "tool":
            self.messages.append({"role": "tool", "content": observation["content"]})
            self.template.append_tool_output(self.chat, observation["content"])
        self.template.open_assistant_turn(self.chat)
        room = self.server.engine.config.max_len - len(self.chat.ids)
        if room < 2:
            return {"tool": "finish", "args": {"summary": CONTEXT_FULL_SUMMARY}}
        generation = self.server.generate(
            self.chat.ids, min(self.max_new_tokens, room), temperature=self.temperature,
            top_p=self.top_p, seed=self.seed * 1_000_003 + self._turn,
            stop_tokens=[self.template.end_id])
        self._turn += 1
        self.template.append_completion(self.chat, generation.tokens)
        text = self.template.tokenizer.decode(generation.tokens)
        self.messages.append(assistant_message(text))
        return {"text": text, "output_tokens": len(generation.tokens)}


def model_agent_factory(checkpoint: str, *, slots: int = 8, max_len: int = 2048,
                        max_new_tokens: int = 256, temperature: float = 0.0,
                        top_p: float = 1.0):
    """A factory `seed -> ModelAgent` over the model in `checkpoint` (a training workdir, a
    checkpoint step directory or a model directory with its tokenizer.json)."""
    from c2jax.sampling import Engine, sampler_config
    from c2jax.train.checkpoint import load_trained_model

    cfg, variables, tokenizer = load_trained_model(checkpoint)
    if tokenizer is None:
        raise FileNotFoundError(f"{checkpoint} has no tokenizer.json: the agent needs the "
                                "model's tokenizer to render the conversation")
    engine = Engine(cfg, variables, tokenizer=tokenizer,
                    config=sampler_config(slots=slots, max_len=max_len))
    server = GenerationServer(engine)
    template = ChatTemplate(tokenizer)

    def factory(seed: int) -> ModelAgent:
        return ModelAgent(server, template, max_new_tokens=max_new_tokens,
                          temperature=temperature, top_p=top_p, seed=seed)

    factory.server = server
    return factory
