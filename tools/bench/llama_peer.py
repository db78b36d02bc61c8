#!/usr/bin/env python3
"""PyTorch peer of inputs/llama_char.ini: transformers' LlamaForCausalLM, the same shapes,
batch, optimizer and data in memory, one process with one thread.

    llama_peer.py --data FILE [--steps N] [--warmup W] [--autocast fp32|bf16] [--compile]

Needs PyTorch 2.x and transformers from PyPI (a venv: tools/bench/llama_bench.sh says how).
The model: 4 layers, 4 query and 2 kv heads, hidden 128, intermediate 352, rope_theta 10000,
RMSNorm eps 1e-5, no biases, untied head, vocab 256, context 128, attention through PyTorch's
scaled_dot_product_attention (transformers' default "sdpa"); AdamW (lr 3e-3, betas 0.9/0.99,
weight decay 0.1 on the matrices as Trellis), gradient clipping 1.0, batch 16 sequences of 128
byte tokens cut at random offsets from the token stream. --autocast bf16 runs forward and loss
under torch.autocast("cpu", dtype=torch.bfloat16); --compile wraps the model in torch.compile.

Prints one JSON line: tokens_per_sec over the timed steps (after `warmup` untimed ones, which
include the compilation), the final loss, the versions.
"""
import argparse
import contextlib
import json
import time

import h5py
import numpy as np
import torch
import transformers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--autocast", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    batch, T, vocab = 16, 128, 256
    with h5py.File(args.data, "r") as f:
        tokens = torch.from_numpy(f["tokens"][...].astype(np.int64))
    config = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=128, intermediate_size=352, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=T,
        rms_norm_eps=1e-5, rope_theta=10000.0, attention_bias=False, mlp_bias=False,
        tie_word_embeddings=False, hidden_act="silu")
    model = transformers.LlamaForCausalLM(config)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.99), eps=1e-8)
    step_model = torch.compile(model) if args.compile else model
    gen = torch.Generator().manual_seed(1)
    cast = (torch.autocast("cpu", dtype=torch.bfloat16) if args.autocast == "bf16"
            else contextlib.nullcontext())

    def step():
        starts = torch.randint(0, tokens.numel() - T - 1, (batch,), generator=gen)
        rows = torch.stack([tokens[s:s + T + 1] for s in starts.tolist()])
        x, y = rows[:, :-1], rows[:, 1:]
        with cast:
            logits = step_model(input_ids=x).logits
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    start = time.perf_counter()
    loss = 0.0
    for _ in range(args.steps):
        loss = step()
    seconds = time.perf_counter() - start
    print(json.dumps({"tokens_per_sec": args.steps * batch * T / seconds, "loss": loss,
                      "torch": torch.__version__, "transformers": transformers.__version__,
                      "autocast": args.autocast, "compile": args.compile,
                      "attn": model.config._attn_implementation}))


if __name__ == "__main__":
    main()
