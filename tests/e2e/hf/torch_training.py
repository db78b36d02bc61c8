"""PyTorch's side of tests/e2e/torch_training.sh (run by TRELLIS_HF_PYTHON: torch, transformers).

    torch_training.py make DIR               a random LlamaForCausalLM (GQA, untied) and a
                                             GPT2LMHeadModel (gelu) saved into DIR/llama and
                                             DIR/gpt2, and DIR/window.npy: one window of
                                             seq_len + 1 random token ids
    torch_training.py train MODEL WINDOW.npy METRICS.jsonl [--steps 50] [--rtol 1e-4]
                                             the same training in PyTorch: every step's loss
                                             against Trellis' metrics.jsonl

The token stream is exactly one window long, so every sample of every step is that window on
both sides, whatever Trellis' sampler draws: the comparison is the model, the loss and the
optimizer, step by step. AdamW as Trellis configures it (lr 1e-3, betas 0.9 / 0.95, eps 1e-8,
weight decay 0.1 on the Linear weights and the untied head only, a constant learning rate, no
clipping), batch 4, mean cross-entropy over every token of the batch, float32.
"""
import argparse
import json
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig
from transformers import LlamaForCausalLM

SEQ_LEN, VOCAB, BATCH = 32, 256, 4


def make(out):
    torch.manual_seed(7)
    llama = LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                        intermediate_size=48, num_hidden_layers=2, vocab_size=VOCAB,
                        max_position_embeddings=SEQ_LEN, rope_theta=10000.0,
                        tie_word_embeddings=False, bos_token_id=None, eos_token_id=None)
    LlamaForCausalLM(llama).save_pretrained(f"{out}/llama", safe_serialization=True)
    gpt2 = GPT2Config(n_layer=2, n_head=4, n_embd=32, n_positions=SEQ_LEN, vocab_size=VOCAB,
                      activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0,
                      attn_pdrop=0.0, bos_token_id=None, eos_token_id=None)
    GPT2LMHeadModel(gpt2).save_pretrained(f"{out}/gpt2", safe_serialization=True)
    rng = np.random.default_rng(11)
    np.save(f"{out}/window.npy", rng.integers(0, VOCAB, SEQ_LEN + 1).astype(np.int64))


def decays(name, param):
    """Trellis decays Linear weights (and an untied head), never embeddings, norms, biases."""
    if param.dim() != 2 or name.endswith("bias"):
        return False
    return not any(part in name for part in ("embed_tokens", "wte", "wpe"))


def train(model_dir, window_path, metrics_path, steps, rtol):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.train()
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if decays(n, p)], "weight_decay": 0.1},
              {"params": [p for n, p in named if not decays(n, p)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    window = torch.from_numpy(np.load(window_path)).long()
    x = window[:-1].repeat(BATCH, 1)
    y = window[1:].repeat(BATCH, 1)
    trellis = {}
    for line in open(metrics_path):
        record = json.loads(line)
        if "loss" in record and "step" in record:
            trellis[record["step"]] = record["loss"]
    worst = 0.0
    for step in range(1, steps + 1):
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step not in trellis:
            sys.exit(f"{metrics_path}: no loss at step {step}")
        diff = abs(trellis[step] - loss.item()) / abs(loss.item())
        worst = max(worst, diff)
        if step in (1, 2, 10, 25, steps) or diff > rtol:
            print(f"  step {step:3d}: torch {loss.item():.7f}, trellis {trellis[step]:.7f}, "
                  f"relative difference {diff:.2e}")
    print(f"{model_dir}: {steps} AdamW steps, worst relative loss difference {worst:.2e} "
          f"(tolerance {rtol:g}); loss {trellis[1]:.4f} -> {trellis[steps]:.4f}")
    return 0 if worst <= rtol else 1


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    t = sub.add_parser("train")
    t.add_argument("model")
    t.add_argument("window")
    t.add_argument("metrics")
    t.add_argument("--steps", type=int, default=50)
    t.add_argument("--rtol", type=float, default=1e-4)
    args = ap.parse_args()
    if args.cmd == "make":
        make(args.out)
        return 0
    return train(args.model, args.window, args.metrics, args.steps, args.rtol)


if __name__ == "__main__":
    sys.exit(main())
