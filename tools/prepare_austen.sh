#!/usr/bin/env bash
# Prepares the demo corpus of inputs/gpt_char.ini: Jane Austen's novels from Debian's
# r-cran-janeaustenr package, unpacked without installing R, converted to byte tokens.
# usage: tools/prepare_austen.sh [out-dir=data/austen]
set -euo pipefail
out=${1:-data/austen}
src=/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb
if [[ ! -f $src ]]; then
  unpack=$(mktemp -d)
  trap 'rm -rf "$unpack"' EXIT
  (cd "$unpack" && apt-get download -q r-cran-janeaustenr >/dev/null)
  dpkg-deb -x "$unpack"/r-cran-janeaustenr_*_all.deb "$unpack/root"
  src="$unpack/root$src"
fi
/usr/bin/python3 "$(dirname "$0")/text_to_tokens.py" --src "$src" --out-dir "$out"
