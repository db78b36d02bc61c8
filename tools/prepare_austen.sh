#!/usr/bin/env bash
# Prepares the demo corpus of inputs/gpt_char.ini and inputs/llama_char.ini: Jane Austen's
# novels from Debian's r-cran-janeaustenr package, unpacked without installing R, converted to
# byte tokens, or (--bpe N) to byte-level BPE tokens of a vocabulary of N trained on them
# (tools/text_to_bpe.py; `make demo-llama`).
# usage: tools/prepare_austen.sh [out-dir=data/austen] [--bpe N]
set -euo pipefail
out=${1:-data/austen}
bpe=${3:-}
[[ ${2:-} == --bpe && -n $bpe ]] || [[ -z ${2:-} ]] || { echo "usage: $0 [out-dir] [--bpe N]" >&2; exit 2; }
src=/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb
if [[ ! -f $src ]]; then
  unpack=$(mktemp -d)
  trap 'rm -rf "$unpack"' EXIT
  (cd "$unpack" && apt-get download -q r-cran-janeaustenr >/dev/null)
  dpkg-deb -x "$unpack"/r-cran-janeaustenr_*_all.deb "$unpack/root"
  src="$unpack/root$src"
fi
if [[ -n $bpe ]]; then
  "$(dirname "$0")/text_to_bpe.py" --src "$src" --out-dir "$out" --vocab-size "$bpe" \
    --source janeaustenr
else
  /usr/bin/python3 "$(dirname "$0")/text_to_tokens.py" --src "$src" --out-dir "$out"
fi
