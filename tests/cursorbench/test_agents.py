import pytest

from cursorbench import agents


def test_specs_name_agents_or_say_what_exists():
    assert isinstance(agents.make_agent_factory("oracle")(0), agents.OracleAgent)
    assert hasattr(agents.make_agent_factory("null")(3), "act")
    factory = agents.make_agent_factory("python:cursorbench.agents:OracleAgent")
    assert factory is agents.OracleAgent
    with pytest.raises(agents.AgentSpecError, match="neither a training workdir"):
        agents.make_agent_factory("model:/ckpt/step_100")
    with pytest.raises(agents.AgentSpecError, match="expected model:CKPT"):
        agents.make_agent_factory("model:")
    with pytest.raises(agents.AgentSpecError, match="choose oracle, null"):
        agents.make_agent_factory("random")
    with pytest.raises(agents.AgentSpecError, match="cannot load"):
        agents.make_agent_factory("python:cursorbench.agents:Missing")
    with pytest.raises(agents.AgentSpecError, match="expected python:package.module:factory"):
        agents.make_agent_factory("python:cursorbench")


def test_oracle_replays_summaries_as_messages(tmp_path):
    import environments

    from cursorbench.mini.generate import generate_suite

    (path,) = generate_suite(tmp_path, "test", 1, context_budget=1200)
    task = environments.load_task(path)
    agent = agents.OracleAgent()
    agent.begin(task, {"role": "user", "content": task.prompt, "tool": "", "is_error": 0},
                {"system_prompt": "sys"})
    actions = [agent.act({"role": "user", "content": task.prompt, "tool": "", "is_error": 0},
                         {})]
    while actions[-1]["tool"] != "finish":
        actions.append(agent.act({"role": "tool", "content": "out", "tool": "", "is_error": 0},
                                 {}))
    roles = [m["role"] for m in agent.messages]
    assert "summary" in roles and roles[:2] == ["system", "user"]
    assert all(set(a) == {"tool", "args"} for a in actions)   # env actions, no thoughts
