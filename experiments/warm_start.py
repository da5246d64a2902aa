"""The tiny warm start of the RL demo: stage A in miniature, run once and cached.

    policy_dir = warm_start(config.warm_start)    # a training workdir RL can start from

0. induction  (only when `induction_steps` > 0) configs/pretrain_tiny.py on synthetic copy
              documents (c2jax/data/copy_task.py) with short blocks: the circuit that copies
              a name from earlier in the context, which an agent's calls need;
1. pretrain   configs/pretrain_tiny.py at 256 tokens (`pretrain_steps` at
              `pretrain_learning_rate`, from the induction stage's weights if there is one;
              `copy_fraction` of the documents are copies of `copy_block` ids). Every stage's
              model is resized by `warm_start.model` and its optimizer set by
              `warm_start.optimizer`;
2. longctx    configs/longctx_tiny.py: YaRN x8 to 2048 tokens (`longctx_steps`);
3. sft data   the oracle agent replays `sft_tasks` tasks of `mini:train` (those of
              `sft_categories` among them, when set; `sft_agent = "runcall"` runs the
              scripted agent of cursorbench/runcall.py instead, and only resolved
              episodes are kept) through the sandboxed
              environment (the same tools the actor uses); its conversations, cut into
              segments at self-summary turns exactly where the RL actor would restart its
              context (system + task + summary, the summary as loss-0 context), become JSONL;
              a `sft_recovery_fraction` of the segments is also written with one failed turn
              (`with_failed_turn`), so the policy sees how to go on after an error; without
              `sft_thoughts` the assistant turns keep their calls and drop the reasoning;
              with `sft_fresh_names` = n each conversation is written n times with made-up
              package and module names (c2jax/data/fresh_names.py), so names must be copied;
4. sft        configs/sft_tiny.py on that JSONL (`sft_steps`), assistant tokens only, with
              `sft_copy_fraction` of copy documents mixed in: fine-tuning on conversations
              alone erases the induction circuit the earlier stages formed;
5. probe      the SFT policy's teacher-forced turn match on the held-out SFT conversations
              (c2jax/train/turn_match.py), written to `turn_match.json` and printed: the share
              of assistant turns it reproduces token for token, per turn index; and the copy
              probe of the pretrained and the SFT policy (c2jax/train/copy_probe.py: does it
              copy from its context?), written to `copy_probe.json` and printed.

Everything goes under `$C2JAX_CACHE_DIR/warm_start/<hash of the settings>/` (default
`<repo>/.cache`), and every stage resumes where it stopped, so a second run costs nothing and
an interrupted one continues.
"""
from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from absl import logging

from c2jax.data.config import validate as validate_data
from c2jax.data.fresh_names import fresh_names
from c2jax.data.tokenizer import cache_dir
from c2jax.train.config import ConfigError
from c2jax.train.copy_probe import copy_probe, describe as describe_copy_probe
from c2jax.train.loop import train
from configs import longctx_tiny, pretrain_tiny, sft_tiny
from cursorbench import agents, harness, suites
from environments import tool_format

SFT_FILE = "sft_conversations.jsonl"
TURN_MATCH = "turn_match.json"
COPY_PROBE = "copy_probe.json"
DONE = "DONE"
#: The induction stage's data: copy documents only (the pipeline needs some real ones: ~7% of
#: the tokens) with short blocks. Blocks of 8-32 ids form the circuit in ~2,500 steps of the
#: tiny model where 16-120 did not in 2,000 (BENCHMARKS.md, "Induction through the
#: pretraining pipeline"); the pretraining stage after it extends it to longer distances.
INDUCTION_COPY_FRACTION = 0.999
INDUCTION_BLOCK = (8, 32)
#: Held-out SFT conversations the probe scores (one forward each).
PROBE_CONVERSATIONS = 48


def conversation_segments(messages: list[dict]) -> list[list[dict]]:
    """A conversation cut at its summary turns: each later segment restarts from system +
    task + the summary (as context, loss 0), as the RL actor's context does."""
    head = list(messages[:2])
    segments, current = [], list(head)
    for message in messages[2:]:
        current.append(message)
        if message["role"] == "summary":
            segments.append(current)
            current = head + [dict(message, train=False)]
    if any(m["role"] in ("assistant", "summary") and m.get("train", True)
           for m in current[2:]):
        segments.append(current)
    return segments


def with_failed_turn(segment: list[dict], rng: random.Random) -> list[dict] | None:
    """`segment` with one failed attempt before a random tool-calling assistant turn: the
    turn's text without its call (context, loss 0) and the error observation the environment
    answers such a turn with. The oracle never errs, so without these the SFT policy has never
    seen an error observation and, after its first malformed call, is off its training
    distribution. None when the segment has no trained tool-calling turn."""
    turns = [i for i, m in enumerate(segment) if i >= 2 and m["role"] == "assistant"
             and m.get("tool_call") and m.get("train", True)]
    if not turns:
        return None
    at = rng.choice(turns)
    failed = segment[at]["content"]
    try:
        tool_format.parse_tool_call(failed)
    except tool_format.ToolCallError as e:
        error = f"error: {e}"
    else:
        return None                   # the text alone holds a call: nothing failed
    return (segment[:at] + [{"role": "assistant", "content": failed, "train": False},
                            {"role": "tool", "content": error}] + segment[at:])


def without_thoughts(messages: list[dict]) -> list[dict]:
    """`messages` with the text before every assistant tool call removed: the calls alone, for
    a policy too small to write the oracle's reasoning (which paraphrases the task and the
    code) without derailing the call after it."""
    return [dict(m, content="") if m["role"] == "assistant" and m.get("tool_call") else m
            for m in messages]


#: `warm_start` fields added after caches existed, at the values that reproduce the warm start
#: from before them: left out of the key there, so existing caches stay valid.
_KEY_NEUTRAL = {"sft_categories": (), "sft_thoughts": True, "sft_fresh_names": 0,
                "sft_copy_fraction": 0.0, "sft_agent": "oracle"}


def _key(ws) -> str:
    settings = {k: v for k, v in ws.to_dict().items()
                if k not in _KEY_NEUTRAL or v != _KEY_NEUTRAL[k]}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


def _sized(config, steps: int, ws):
    """A stage config shortened to `steps` (one eval and one checkpoint, at the end), its model
    resized by `ws.model` and its optimizer set by `ws.optimizer` (fields left None keep the
    stage's own)."""
    config.model.update(ws.model.to_dict())
    config.optimizer.update({k: v for k, v in ws.optimizer.to_dict().items() if v is not None})
    with config.unlocked():
        config.train.steps = config.train.eval_every = config.train.checkpoint_every = steps
        config.optimizer.warmup_steps = min(config.optimizer.warmup_steps, steps // 4)
    return config


def _pretrain_config(ws, copy_fraction: float, copy_block, init_from: str = ""):
    pretrain = pretrain_tiny.get_config()
    if ws.pretrain_learning_rate is not None:
        pretrain.optimizer.learning_rate = ws.pretrain_learning_rate
    pretrain.data.copy_fraction = copy_fraction
    pretrain.data.copy_block = tuple(copy_block)
    pretrain.train.init_from = init_from
    return pretrain


def _pretrain_stages(ws, root: Path) -> list[tuple[str, object]]:
    """(name, config) of the pretraining stages in order: induction (when `induction_steps`)
    and pretrain. Raises ConfigError naming the field when their data settings are invalid, so
    a bad `copy_block` fails before anything runs."""
    stages, init_from = [], ""
    if ws.induction_steps:
        stages.append(("induction", _sized(_pretrain_config(
            ws, INDUCTION_COPY_FRACTION, INDUCTION_BLOCK), ws.induction_steps, ws)))
        init_from = str(root / "induction")
    stages.append(("pretrain", _sized(_pretrain_config(
        ws, ws.copy_fraction, ws.copy_block, init_from), ws.pretrain_steps, ws)))
    for name, config in stages:
        _check_data(name, config, "warm_start.copy_fraction / copy_block")
    return stages


def _check_data(stage: str, config, fields: str) -> None:
    """Raises ConfigError naming the stage and the warm_start `fields` behind its data
    settings when they are invalid."""
    try:
        validate_data(config.data)
    except ValueError as e:
        raise ConfigError(f"[warm_start] the {stage} stage ({fields}): {e}") from None


def _stage(config, workdir: Path) -> None:
    with config.unlocked():
        config.train.progress_bar = True
    logging.info("warm start: %s stage in %s", config.stage, workdir)
    train(config, workdir)


def sft_conversations(ws, out: Path) -> int:
    """Runs `ws.sft_agent` (the oracle, or the scripted `runcall` agent) on mini:train (its
    tasks of `sft_categories`, if any) and writes the segmented conversations of the episodes
    it resolved; returns count."""
    suite = suites.resolve(f"mini:train:{ws.sft_tasks}", context_budget=ws.sft_context_chars,
                           categories=tuple(ws.sft_categories))
    run_dir = out.parent / "oracle_run"
    harness.run(suite.tasks, agents.make_agent_factory(ws.sft_agent), run_dir, k=1,
                workers=ws.oracle_workers, suite=suite.name, agent=ws.sft_agent)
    resolved = {r["task_id"] for r in harness.read_jsonl(run_dir / harness.RESULTS)
                if r["resolved"]}
    written, rng = 0, random.Random(0)
    with open(out, "w") as f:
        for line in (run_dir / harness.TRAJECTORIES).read_text().splitlines():
            trace = json.loads(line)
            if trace.get("error") or not trace.get("messages") or trace["task_id"] not in resolved:
                continue
            messages = trace["messages"] if ws.sft_thoughts else without_thoughts(
                trace["messages"])
            copies = ([fresh_names(messages, rng) for _ in range(ws.sft_fresh_names)]
                      if ws.sft_fresh_names else [messages])
            for copy in copies:
                for segment in conversation_segments(copy):
                    variants = [segment]
                    if rng.random() < ws.sft_recovery_fraction:
                        variants.append(with_failed_turn(segment, rng))
                    for variant in filter(None, variants):
                        f.write(json.dumps({"messages": variant}) + "\n")
                        written += 1
    return written


def sft_turn_match(sft, sft_dir: Path) -> dict:
    """Teacher-forced turn match of the SFT policy in `sft_dir` on the held-out split of its
    data (`sft`: that stage's config)."""
    from c2jax.data.chat import ChatTemplate
    from c2jax.data.corpus import open_documents
    from c2jax.train.checkpoint import load_trained_model
    from c2jax.train.turn_match import assistant_turns, turn_match
    cfg, variables, tokenizer = load_trained_model(sft_dir)
    template = ChatTemplate(tokenizer)
    held_out = open_documents(sft.data.source, split="eval",
                              eval_fraction=sft.data.eval_fraction)
    rendered = [assistant_turns(template, held_out[i]["messages"])
                for i in range(min(len(held_out), PROBE_CONVERSATIONS))]
    return turn_match(cfg, variables, rendered, seq_len=sft.data.seq_len)


def stage_copy_probe(workdir: Path) -> dict:
    """The copy probe (c2jax/train/copy_probe.py) of the latest checkpoint in `workdir`."""
    from c2jax.train.checkpoint import load_trained_model
    cfg, variables, tokenizer = load_trained_model(workdir)
    return copy_probe(cfg, variables, tokenizer)


def describe_turn_match(stats: dict) -> str:
    """One line: exact-match share (and turns scored) per turn index."""
    cells = [f"turn {i}: {s['exact']:.0%} of {s['turns']}" for i, s in stats["by_turn"].items()]
    return "warm start, held-out turns reproduced token for token: " + ", ".join(cells)


def _sft_config(ws, root: Path):
    """The SFT stage's config. Raises ConfigError naming the field when its data settings are
    invalid (checked before anything runs)."""
    sft = sft_tiny.get_config(str(root / "longctx"))
    with sft.unlocked():
        sft.data.source = str(root / SFT_FILE)
        sft.data.seq_len = ws.sft_seq_len
        sft.data.batch_size = ws.sft_batch_size
        sft.data.copy_fraction = ws.sft_copy_fraction
        sft.data.copy_block = tuple(ws.copy_block)
        sft.optimizer.learning_rate = ws.sft_learning_rate
    _check_data("sft", sft, "warm_start.sft_copy_fraction / copy_block")
    return sft


def warm_start(ws) -> Path:
    """Runs (or reuses) the warm start described by `ws` (rl config `warm_start` section);
    returns the SFT workdir, a valid `init_from`."""
    root = cache_dir() / "warm_start" / _key(ws)
    sft_dir = root / "sft"
    if not (root / DONE).exists():
        pretrain_stages = _pretrain_stages(ws, root)
        _sft_config(ws, root)                    # its data settings fail before anything runs
        root.mkdir(parents=True, exist_ok=True)
        (root / "settings.json").write_text(json.dumps(ws.to_dict(), indent=1))
        for name, config in pretrain_stages:
            _stage(config, root / name)
        _stage(_sized(longctx_tiny.get_config(str(root / "pretrain")), ws.longctx_steps, ws),
               root / "longctx")
        data = root / SFT_FILE
        if not data.exists():
            count = sft_conversations(ws, data.with_suffix(".tmp"))
            data.with_suffix(".tmp").replace(data)
            logging.info("warm start: %d SFT conversations in %s", count, data)
        _stage(_sized(_sft_config(ws, root), ws.sft_steps, ws), sft_dir)
        (root / DONE).write_text("ok\n")
    if not (root / TURN_MATCH).exists():
        stats = sft_turn_match(_sft_config(ws, root), sft_dir)
        (root / TURN_MATCH).write_text(json.dumps(stats, indent=1))
    if not (root / COPY_PROBE).exists():
        probes = {stage: stage_copy_probe(root / stage) for stage in ("pretrain", "sft")}
        (root / COPY_PROBE).write_text(json.dumps(probes, indent=1))
    for stage, stats in json.loads((root / COPY_PROBE).read_text()).items():
        print(f"warm start {stage}, {describe_copy_probe(stats)}", flush=True)
    print(describe_turn_match(json.loads((root / TURN_MATCH).read_text())), flush=True)
    return sft_dir
