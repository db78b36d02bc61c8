#!/usr/bin/python3
"""Tokenise a text corpus with byte-level BPE into Trellis "trellis.tokens" HDF5 files.

    tools/text_to_bpe.py --src corpus/ --out-dir data/mine --vocab-size 4096
    tools/text_to_bpe.py --src data.parquet --text-column text --tokenizer tokenizer.json ...

Sources (--src, repeatable; a file, a directory (its files, by name) or a glob): plain text
(.txt and anything else, also .gz/.bz2/.xz; an R lazy-load database .rdb as
tools/text_to_tokens.py reads it), one document per file; JSON Lines (.jsonl, also
compressed), one document per line in the field --text-field (default "text"); Parquet
(.parquet), one document per row of the column --text-column (default "text") -- the format
Hugging Face datasets are published in. Documents are separated by the end-of-text token.

The tokenizer: --tokenizer FILE takes a Hugging Face tokenizer.json as it is (GPT-2's,
Llama 3's, ...); otherwise --vocab-size N trains a byte-level BPE (GPT-2's scheme: bytes
mapped to printable characters, no unknown token) with Hugging Face `tokenizers` on the
documents (the first --train-bytes of them, default all), with "<|endoftext|>" as its only
special token. The tokenizer is written beside the shards (tokenizer.json) and into every token
file (the dataset /tokenizer_json, UTF-8 bytes; attributes tokenizer = "bpe" and eot_token).

Streaming: documents are read, encoded in batches and written as they come, so memory does
not grow with the corpus (only training a new vocabulary keeps the BPE word counts). Tokens
go to shards of at most --shard-tokens each (default 100M), named <split>-0000i-of-0000K.h5
once K is known; one shard is <split>.h5. Validation: of every block of --val-block tokens
(default 64 Ki), the last --val-fraction goes to val (6554 tokens of each 65536 by default), so
val samples the whole corpus evenly without knowing its size in advance; make the block larger
than a few model contexts (a validation window that crosses from one val piece into the next
sees two distant passages). Ids are uint16 when the
vocabulary fits (<= 65536), else uint32. Progress (documents, bytes, tokens per second) goes
to stderr every few seconds.

Needs numpy, h5py, tokenizers and (for Parquet) pyarrow: tools/install-deps.sh puts the last
two into the tools' venv.
"""
import argparse
import bz2
import glob
import gzip
import json
import lzma
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trellis_env  # noqa: E402

if __name__ == "__main__":
    trellis_env.reexec()  # before numpy, h5py, tokenizers: the tools' Python

import numpy as np

from shard_files import ConversionError, run_conversion, shard_name, stale_outputs  # noqa: E402

FORMAT, FORMAT_VERSION = "trellis.tokens", 1
EOT = "<|endoftext|>"
EOT_CANDIDATES = (EOT, "<|end_of_text|>", "</s>", "<eos>")


# ---- documents ---------------------------------------------------------------------------

def open_text(path):
    opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}.get(
        os.path.splitext(path)[1], open)
    return opener(path, "rt", encoding="utf-8", errors="strict")


def source_files(specs):
    files = []
    for spec in specs:
        if os.path.isdir(spec):
            files += sorted(os.path.join(spec, n) for n in os.listdir(spec)
                            if os.path.isfile(os.path.join(spec, n)))
        elif os.path.exists(spec):
            files.append(spec)
        else:
            matched = sorted(glob.glob(spec, recursive=True))
            if not matched:
                raise ConversionError(f"{spec}: no such file, directory or glob match")
            files += matched
    return files


def documents(files, args):
    """(document text, its size in bytes) in corpus order."""
    for path in files:
        base = path[:-len(os.path.splitext(path)[1])] if path.endswith((".gz", ".bz2", ".xz")) else path
        try:
            if base.endswith(".parquet"):
                import pyarrow.parquet as pq
                table = pq.ParquetFile(path)
                if args.text_column not in table.schema_arrow.names:
                    raise ConversionError(f"{path}: no column '{args.text_column}' (columns: "
                                          f"{', '.join(table.schema_arrow.names)}; --text-column)")
                for batch in table.iter_batches(columns=[args.text_column], batch_size=1024):
                    for text in batch.column(0).to_pylist():
                        if text:
                            yield text, len(text.encode("utf-8"))
            elif base.endswith(".jsonl"):
                with open_text(path) as f:
                    for number, line in enumerate(f, 1):
                        if not line.strip():
                            continue
                        try:
                            text = json.loads(line)[args.text_field]
                        except (ValueError, KeyError, TypeError) as e:
                            raise ConversionError(f"{path}:{number}: no JSON object with a string "
                                                  f"field '{args.text_field}' ({e}; --text-field)")
                        if not isinstance(text, str):
                            raise ConversionError(f"{path}:{number}: field '{args.text_field}' "
                                                  "is not a string")
                        yield text, len(text.encode("utf-8"))
            elif path.endswith(".rdb"):  # an R lazy-load database (janeaustenr's novels)
                from text_to_tokens import read_rdb_text
                text = read_rdb_text(path).decode("utf-8")
                yield text, len(text.encode("utf-8"))
            else:
                with open_text(path) as f:
                    text = f.read()
                yield text, len(text.encode("utf-8"))
        except UnicodeDecodeError as e:
            raise ConversionError(f"{path}: not UTF-8 text ({e})")


# ---- the tokenizer -----------------------------------------------------------------------

def train_tokenizer(files, args):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=args.vocab_size, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)

    def sample():
        taken = 0
        for text, size in documents(files, args):
            yield text
            taken += size
            if args.train_bytes and taken >= args.train_bytes:
                return

    started = time.perf_counter()
    tok.train_from_iterator(sample(), trainer=trainer)
    print(f"trained a byte-level BPE of {tok.get_vocab_size()} tokens in "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
    return tok


def end_of_text(tok, args):
    names = [args.eot_token] if args.eot_token else EOT_CANDIDATES
    for name in names:
        eot = tok.token_to_id(name)
        if eot is not None:
            return name, eot
    raise ConversionError(f"the tokenizer has none of {', '.join(names)} to end documents "
                          "with (--eot-token names it)")


# ---- writing -----------------------------------------------------------------------------

class ShardWriter:
    """One split's tokens into shards of at most `limit` tokens, each file written through a
    .part name and given its final name (which needs the shard count) at the end."""

    def __init__(self, out_dir, split, limit, dtype, attrs, tokenizer_json, chunk):
        self.out_dir, self.split, self.limit, self.dtype = out_dir, split, limit, dtype
        self.attrs, self.tokenizer_json, self.chunk = attrs, tokenizer_json, chunk
        self.parts, self.file, self.count, self.total = [], None, 0, 0

    def _open(self):
        import h5py
        path = os.path.join(self.out_dir, f".{self.split}-{len(self.parts):05d}.part")
        self.file = h5py.File(path, "w")
        self.data = self.file.create_dataset("tokens", shape=(0,), maxshape=(None,),
                                             dtype=self.dtype, chunks=(self.chunk,))
        self.file.create_dataset("tokenizer_json",
                                 data=np.frombuffer(self.tokenizer_json, dtype=np.uint8))
        for key, value in self.attrs.items():
            self.file.attrs[key] = value
        self.file.attrs["split"] = self.split
        self.parts.append(path)
        self.count = 0

    def write(self, ids):
        at = 0
        while at < len(ids):
            if self.file is None or self.count == self.limit:
                self.close_file()
                self._open()
            take = min(len(ids) - at, self.limit - self.count)
            self.data.resize((self.count + take,))
            self.data[self.count:self.count + take] = ids[at:at + take]
            self.count += take
            self.total += take
            at += take

    def close_file(self):
        if self.file is not None:
            self.file.flush()
            self.file.close()
            self.file = None

    def finish(self):
        self.close_file()
        k = len(self.parts)
        names = [f"{self.split}.h5"] if k == 1 else [shard_name(self.split, i, k) for i in range(k)]
        for part, name in zip(self.parts, names):
            os.replace(part, os.path.join(self.out_dir, name))
            print(f"  {os.path.join(self.out_dir, name)}", file=sys.stderr)
        for name in stale_outputs(self.out_dir, self.split, set(names)):
            print(f"warning: {os.path.join(self.out_dir, name)} is left from an earlier "
                  "conversion; remove it so that globs do not pick it up", file=sys.stderr)


def convert(args):
    from tokenizers import Tokenizer
    files = source_files(args.src)
    tok = Tokenizer.from_file(args.tokenizer) if args.tokenizer else train_tokenizer(files, args)
    eot_name, eot = end_of_text(tok, args)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    dtype = np.uint16 if vocab <= 65536 else np.uint32
    os.makedirs(args.out_dir, exist_ok=True)
    tokenizer_path = os.path.join(args.out_dir, "tokenizer.json")
    tok.save(tokenizer_path)
    with open(tokenizer_path, "rb") as f:
        tokenizer_json = f.read()
    attrs = {"format": FORMAT, "format_version": np.int32(FORMAT_VERSION),
             "vocab_size": np.int32(vocab), "tokenizer": "bpe", "eot_token": eot_name,
             "eot_id": np.int32(eot),
             "source": args.source or ", ".join(os.path.basename(f) for f in files[:5]) +
             (" ..." if len(files) > 5 else "") + "; converted by tools/text_to_bpe.py"}
    writers = {s: ShardWriter(args.out_dir, s, args.shard_tokens, dtype, attrs, tokenizer_json,
                              args.chunk_tokens) for s in ("train", "val")}
    val_len = int(round(args.val_block * args.val_fraction))
    position, docs, size, started, shown = 0, 0, 0, time.perf_counter(), time.perf_counter()

    def emit(ids):
        nonlocal position
        ids = np.asarray(ids, dtype=dtype)
        while len(ids):
            offset = position % args.val_block
            split = "train" if offset < args.val_block - val_len else "val"
            bound = args.val_block - val_len if split == "train" else args.val_block
            take = min(len(ids), bound - offset)
            writers[split].write(ids[:take])
            ids, position = ids[take:], position + take

    batch = []
    for text, nbytes in documents(files, args):
        batch.append(text)
        docs, size = docs + 1, size + nbytes
        if len(batch) == 256:
            for enc in tok.encode_batch(batch, add_special_tokens=False):
                emit(enc.ids + [eot])
            batch = []
        if time.perf_counter() - shown > 5:
            shown = time.perf_counter()
            print(f"  {docs} documents, {size / 1e6:.1f} MB, {position} tokens, "
                  f"{position / (shown - started):.0f} tokens/s", file=sys.stderr)
    for enc in tok.encode_batch(batch, add_special_tokens=False):
        emit(enc.ids + [eot])
    if position == 0:
        raise ConversionError("no documents in " + ", ".join(args.src))
    for writer in writers.values():
        if writer.total:
            writer.finish()
    if args.val_fraction > 0 and writers["val"].total == 0:
        print(f"warning: no validation tokens: the corpus ({position} tokens) ends before the "
              f"first val piece of a {args.val_block}-token block (--val-block)", file=sys.stderr)
    seconds = time.perf_counter() - started
    print(f"{docs} documents, {size} bytes -> {writers['train'].total} train + "
          f"{writers['val'].total} val tokens (vocab {vocab}, {np.dtype(dtype).name}, "
          f"{size / max(position, 1):.2f} bytes per token); tokenizer {tokenizer_path}; "
          f"{seconds:.1f} s")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", action="append", required=True,
                   help="a file (text, .jsonl, .parquet; .gz/.bz2/.xz), a directory or a glob; repeat")
    p.add_argument("--out-dir", required=True, help="where the shards and tokenizer.json go")
    p.add_argument("--tokenizer", default="", help="a Hugging Face tokenizer.json to use as it is")
    p.add_argument("--vocab-size", type=int, default=0, help="train a byte-level BPE of this size")
    p.add_argument("--train-bytes", type=int, default=0,
                   help="train the BPE on the first documents up to this many bytes (0: all)")
    p.add_argument("--eot-token", default="", help="the token that ends a document")
    p.add_argument("--text-field", default="text", help="JSON Lines: the field with the text")
    p.add_argument("--text-column", default="text", help="Parquet: the column with the text")
    p.add_argument("--val-fraction", type=float, default=0.1, help="share of tokens for val.h5")
    p.add_argument("--val-block", type=int, default=1 << 16, help="tokens per train/val block")
    p.add_argument("--shard-tokens", type=int, default=100_000_000, help="tokens per shard")
    p.add_argument("--chunk-tokens", type=int, default=65536, help="tokens per HDF5 chunk")
    p.add_argument("--source", default="", help="provenance text")
    args = p.parse_args(argv)
    if bool(args.tokenizer) == bool(args.vocab_size):
        p.error("give --tokenizer FILE or --vocab-size N (one of them)")
    if args.vocab_size and not 257 <= args.vocab_size <= 1 << 31:
        p.error("--vocab-size must be in [257, 2^31] (256 bytes + the end-of-text token + merges)")
    if not 0 <= args.val_fraction < 1 or args.val_block < 1:
        p.error("--val-fraction must be in [0, 1) and --val-block positive")
    if args.shard_tokens < 1 or args.chunk_tokens < 1:
        p.error("--shard-tokens and --chunk-tokens must be positive")
    args.chunk_tokens = min(args.chunk_tokens, args.shard_tokens)
    return run_conversion(convert, args)


if __name__ == "__main__":
    sys.exit(main())
