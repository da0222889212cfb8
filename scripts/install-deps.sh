#!/usr/bin/env bash
# Installs the Debian 12 packages that keel needs. Idempotent and non-interactive: when
# everything is present it only checks and exits.
#   install-deps.sh run   what building and running the `keel` binary needs (`make run`)
#   install-deps.sh       everything: also what the tests, fuzzing and benchmarks need (`make test`)
set -euo pipefail

mode="${1:-all}"
case "$mode" in
  run|all) ;;
  *) echo "install-deps: unknown mode '$mode' (run | all)" >&2; exit 2 ;;
esac

# Building and running keel.
packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost-dev libboost-system-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
  libpcre2-dev libxxhash-dev
  libzmq3-dev libmsgpack-cxx-dev  # cluster cache events (vLLM's format: msgpack over ZeroMQ)
  libucx-dev  # the KV transfer service between engines (UCX: shared memory, TCP, RDMA)
  libssl-dev  # keel pull: HTTPS (Boost.Beast over OpenSSL) and SHA-256
)

# Testing, fuzzing and benchmarking (not needed by `make run`).
test_packages=(
  clang-format
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  clang-15 libfuzzer-15-dev  # the libFuzzer targets of tests/fuzz (the fuzz preset)
  chromium  # the gateway dashboard's headless-browser test (tests/tools/cluster_dashboard_test)
  iproute2  # ip netns / veth / bridge: the multi-host test (tests/tools/cluster_netns_test)
  etcd-server etcd-client  # membership and leader election on etcd v3 (tests/membership, cluster up --membership etcd)
  python3-pydantic python3-email-validator  # pydantic 1.10's JSON Schemas (tests/sdk schema corpus)
)
if [ "$mode" = all ]; then packages+=("${test_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# kubectl (Debian's kubernetes-client) applies deploy/ to a fake API server in tests/kube
# (docs/deploy.md). A machine may already have another kubectl (e.g. Google's `kubectl` package,
# whose /usr/bin/kubectl the Debian package cannot overwrite), which is kept.
if [ "$mode" = all ] && ! command -v kubectl >/dev/null; then
  missing+=(kubernetes-client)
fi

# Node.js runs the end-to-end test with the official openai SDK (tests/sdk); a machine may already
# have its own node, which is kept.
if [ "$mode" = all ] && { ! command -v node >/dev/null || ! command -v npm >/dev/null; }; then
  missing+=(nodejs npm)
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Everything below serves the tests only.
if [ "$mode" = run ]; then exit 0; fi

# The openai npm package, pinned, outside the source tree.
npm_dir="${KEEL_NPM_DIR:-${HOME:-/tmp}/.cache/keel/npm}"
openai_version="4.104.0"
if ! grep -qs "\"version\": \"$openai_version\"" "$npm_dir/node_modules/openai/package.json"; then
  echo "install-deps: npm install openai@$openai_version into $npm_dir" >&2
  mkdir -p "$npm_dir"
  npm install --prefix "$npm_dir" --no-audit --no-fund --silent "openai@$openai_version" >/dev/null
fi

# The JSON Schema corpus test (tests/sdk/schema_corpus_test.cjs): zod and the converters clients
# use (zod-to-json-schema, the AI SDK with its OpenAI-compatible provider, LangChain), and ajv +
# ajv-formats to validate the answers; pinned, next to openai.
corpus_packages=(zod@3.25.76 zod-to-json-schema@3.25.2 ai@5.0.277 @ai-sdk/openai-compatible@1.0.61
                 @langchain/core@0.3.80 ajv@8.20.0 ajv-formats@3.0.1)
for p in "${corpus_packages[@]}"; do
  if ! grep -qs "\"version\": \"${p##*@}\"" "$npm_dir/node_modules/${p%@*}/package.json"; then
    echo "install-deps: npm install ${corpus_packages[*]} into $npm_dir" >&2
    mkdir -p "$npm_dir"
    npm install --prefix "$npm_dir" --no-audit --no-fund --silent "openai@$openai_version" \
      "${corpus_packages[@]}" >/dev/null
    break
  fi
done
