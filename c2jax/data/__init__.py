"""Training data: tokenizer, chat/tool-call template, document sources, packing, grain pipelines.

Modules, each with one job (read them in this order):

- `tokenizer`: byte-level BPE (HF `tokenizers`): train, cache, save next to checkpoints, load.
- `chat`: messages <-> token ids + loss mask (SFT, sampler prompts, RL trajectories).
- `corpus`: which documents exist (source-file trees, JSONL) and the held-out split.
- `token_cache`: every document encoded once, memory-mapped afterwards.
- `packing`: documents -> fixed-length rows with `segment_ids` / `positions` / `loss_mask`.
- `config`: the data config (`data_config()`), every knob with its default.
- `pipeline`: the grain pipeline and the checkpointable `BatchIterator` the train loop reads.

`docs/training.md` ("Data") walks through the layouts with examples.
"""
