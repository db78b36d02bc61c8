"""transformers' side of tests/e2e/hf_transformers.sh (run by a Python with torch,
transformers, safetensors and numpy: TRELLIS_HF_PYTHON).

    hf_transformers.py make DIR          random GPT2LMHeadModel, LlamaForCausalLM (GQA) and a
                                         Llama 3 (scaled RoPE, biases, tied, one kv head)
                                         saved with save_pretrained into DIR/gpt2, llama, llama3
    hf_transformers.py logits MODEL PROMPT TRELLIS.npy [--tol T]
                                         max |logit difference| on the prompt's bytes
    hf_transformers.py loss MODEL TOKENS.npy SEQ_LEN TRELLIS_LOSS [--rtol R]
                                         mean cross-entropy over the windows `trellis eval`
                                         scores: window k = tokens[k T : k T + T + 1]
    hf_transformers.py checks FILE       every comparison FILE lists, one per line, its fields
                                         tab-separated: "logits MODEL PROMPT TRELLIS.npy" or
                                         "loss MODEL TOKENS.npy SEQ_LEN TRELLIS_LOSS" (default
                                         tolerances): one Python start-up (torch and
                                         transformers take seconds to import) for them all

Each comparison prints what it measured; the command exits 1 when any is past its tolerance.
Everything runs in float32 on the CPU.
"""

import argparse
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig
from transformers import LlamaForCausalLM


def scaled(model, seed):
    """Weights far from the tiny initial ones, so the logits are O(1) and a swapped or
    transposed tensor shows: N(0, 0.3^2), norm weights 1 + N(0, 0.1^2), biases N(0, 0.1^2)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if "norm" in name or ".ln_" in name:
                p.copy_(1 + 0.1 * noise if name.endswith("weight") else 0.1 * noise)
            elif name.endswith("bias"):
                p.copy_(0.1 * noise)
            else:
                p.copy_(0.3 * noise)
    return model


def make(out):
    gpt2 = GPT2Config(n_layer=2, n_head=4, n_embd=32, n_positions=32, vocab_size=256,
                      activation_function="gelu", bos_token_id=None, eos_token_id=None)
    scaled(GPT2LMHeadModel(gpt2), 1).save_pretrained(f"{out}/gpt2", safe_serialization=True)
    # transformers' default GPT-2 activation, original GPT-2's: gelu_new (tanh approximation).
    gpt2_tanh = GPT2Config(n_layer=2, n_head=4, n_embd=32, n_positions=32, vocab_size=256,
                           bos_token_id=None, eos_token_id=None)
    assert gpt2_tanh.activation_function == "gelu_new"
    scaled(GPT2LMHeadModel(gpt2_tanh), 4).save_pretrained(f"{out}/gpt2_tanh",
                                                          safe_serialization=True)
    llama = LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                        intermediate_size=48, num_hidden_layers=2, vocab_size=256,
                        max_position_embeddings=32, rope_theta=10000.0,
                        tie_word_embeddings=False, bos_token_id=None, eos_token_id=None)
    scaled(LlamaForCausalLM(llama), 2).save_pretrained(f"{out}/llama", safe_serialization=True)
    # Llama 3's options: frequency scaling (original context 16: every band of the 8-wide
    # heads is scaled, blended or kept within the 32 positions), biases, a tied head, one kv
    # head (multi-query).
    llama3 = LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=1,
                         intermediate_size=40, num_hidden_layers=2, vocab_size=256,
                         max_position_embeddings=32, rope_theta=10000.0, rms_norm_eps=1e-5,
                         rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                       "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                       "original_max_position_embeddings": 16},
                         attention_bias=True, mlp_bias=True, tie_word_embeddings=True,
                         bos_token_id=None, eos_token_id=None)
    scaled(LlamaForCausalLM(llama3), 3).save_pretrained(f"{out}/llama3", safe_serialization=True)


def load(path):
    # float32 whatever the folder holds (transformers before 4.56 named the argument torch_dtype)
    version = tuple(int(v) for v in transformers.__version__.split(".")[:2])
    key = "dtype" if version >= (4, 56) else "torch_dtype"
    return AutoModelForCausalLM.from_pretrained(path, **{key: torch.float32}).eval()


def logits(args):
    ids = torch.tensor([list(args.prompt.encode())])
    with torch.no_grad():
        ref = load(args.model)(ids).logits[0].numpy()
    got = np.load(args.trellis)
    if got.shape != ref.shape:
        sys.exit(f"FAIL: trellis logits {got.shape}, transformers {ref.shape}")
    diff = float(np.abs(got - ref).max())
    print(f"{args.model}: max |logit diff| {diff:.3g} over {ref.size} logits "
          f"(|logits| up to {np.abs(ref).max():.3g}; tolerance {args.tol:g})")
    return 0 if diff <= args.tol else 1


def loss(args):
    tokens = np.load(args.tokens).astype(np.int64)
    t = args.seq_len
    windows = (len(tokens) - 1) // t
    x = np.stack([tokens[k * t: k * t + t + 1] for k in range(windows)])
    model = load(args.model)
    total = 0.0
    with torch.no_grad():
        for b in range(0, windows, 64):
            batch = torch.from_numpy(x[b: b + 64])
            out = model(batch[:, :-1]).logits.double()
            total += torch.nn.functional.cross_entropy(
                out.reshape(-1, out.shape[-1]), batch[:, 1:].reshape(-1), reduction="sum").item()
    ref = total / (windows * t)
    rel = abs(args.trellis_loss - ref) / ref
    print(f"{args.model}: loss over {windows} windows: transformers {ref:.6f}, "
          f"trellis {args.trellis_loss:.6f}, relative difference {rel:.3g} "
          f"(tolerance {args.rtol:g})")
    return 0 if rel <= args.rtol else 1


def checks(path):
    failed = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "logits" and len(fields) == 4:
                args = argparse.Namespace(model=fields[1], prompt=fields[2], trellis=fields[3],
                                          tol=1e-4)
                ok = logits(args) == 0
            elif fields[0] == "loss" and len(fields) == 5:
                args = argparse.Namespace(model=fields[1], tokens=fields[2], seq_len=int(fields[3]),
                                          trellis_loss=float(fields[4]), rtol=1e-5)
                ok = loss(args) == 0
            else:
                sys.exit(f"FAIL: {path}:{number}: not a logits or loss check: {line!r}")
            if not ok:
                failed.append(f"{fields[0]} {fields[1]}")
    for check in failed:
        print(f"FAIL: {check}")
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("make")
    p.add_argument("out")
    p = sub.add_parser("logits")
    p.add_argument("model")
    p.add_argument("prompt")
    p.add_argument("trellis")
    p.add_argument("--tol", type=float, default=1e-4)
    p = sub.add_parser("loss")
    p.add_argument("model")
    p.add_argument("tokens")
    p.add_argument("seq_len", type=int)
    p.add_argument("trellis_loss", type=float)
    p.add_argument("--rtol", type=float, default=1e-5)
    p = sub.add_parser("checks")
    p.add_argument("file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.command == "make":
        make(args.out)
        return 0
    if args.command == "checks":
        return checks(args.file)
    return logits(args) if args.command == "logits" else loss(args)


if __name__ == "__main__":
    sys.exit(main())
