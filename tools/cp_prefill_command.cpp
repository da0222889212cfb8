// `keel cp-prefill`: flags, and one member's run printed as a JSON line (see cp_prefill_command.h).
// Member 0 prints its ready line ({"role":"cp-member","port":P,"pid":N}) once it listens: start
// the other members with --join HOST:P.
#include "cp_prefill_command.h"

#include <unistd.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli_flags.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "cp/prefill_run.h"
#include "cp/tcp_ring.h"
#include "host/compute.h"
#include "host/model_loading.h"
#include "model/kv_type.h"
#include "proc/ready_line.h"

namespace keel::cli {
namespace {

nlohmann::json to_json(const CpPrefillOptions& o, const cp::PrefillReport& r) {
  nlohmann::json rounds = nlohmann::json::array();
  for (const cp::PrefillRound& x : r.rounds) {
    rounds.push_back({{"seconds", x.seconds},
                      {"wait_seconds", x.stats.wait_seconds},
                      {"attention_seconds", x.stats.attention_seconds},
                      {"bytes_sent", x.stats.bytes_sent},
                      {"attention_pairs", x.stats.attention_pairs}});
  }
  return {{"members", o.members},       {"rank", o.rank},
          {"tokens", o.tokens},         {"overlap", !o.no_overlap},
          {"positions", r.positions},   {"kv_bytes", r.kv_bytes},
          {"next_token", r.next_token}, {"rounds", rounds},
          {"generated", r.generated},   {"decode_seconds", r.decode_seconds}};
}

Status cp_prefill(const CpPrefillOptions& o) {
  KEEL_ASSIGN_OR_RETURN(host::ComputeSetup compute, host::setup_compute(o.compute));
  KEEL_ASSIGN_OR_RETURN(const DType kv_type, model::parse_kv_type(o.kv_type));
  cp::TcpRingOptions ring_opts;
  ring_opts.rank = o.rank;
  ring_opts.size = o.members;
  ring_opts.listen = o.listen;
  ring_opts.join = o.join;
  ring_opts.timeout = std::chrono::seconds(o.timeout_s);
  if (o.members < 1 || o.rank < 0 || o.rank >= o.members || (o.rank > 0 && o.join.empty())) {
    return Status::invalid_argument("--rank must be in [0, --cp) and members > 0 need --join");
  }
  model::ModelOptions mopts;
  KEEL_ASSIGN_OR_RETURN(host::LoadedModel loaded, host::load_model(o.model_path, o.compute, mopts));
  ThreadPool pool(compute.threads);
  kernels::Ops ops(compute.isa, &pool);
  cp::PrefillRun run;
  run.tokens = o.tokens;
  run.seed = static_cast<uint32_t>(o.seed);
  run.kv_type = kv_type;
  run.overlap = !o.no_overlap;
  run.rounds = o.rounds;
  run.decode = o.decode;
  std::unique_ptr<cp::TcpRing> ring;
  if (o.members > 1) {
    KEEL_ASSIGN_OR_RETURN(
        ring, cp::TcpRing::connect(ring_opts, [&](uint16_t port) {
          (void)proc::print_ready_line(
              {{"role", "cp-member"}, {"port", port}, {"pid", static_cast<int64_t>(::getpid())}});
        }));
  }
  const Result<cp::PrefillReport> report =
      ring ? cp::run_prefill_member(*loaded.model, ops, *ring, run)
           : cp::run_prefill_alone(*loaded.model, ops, run);
  KEEL_TRY(report.status());
  std::printf("%s\n", to_json(o, *report).dump().c_str());
  std::fflush(stdout);
  return Status();
}

}  // namespace

CLI::App* add_cp_prefill_command(CLI::App& app, CpPrefillOptions* o) {
  CLI::App* cmd = app.add_subcommand(
      "cp-prefill",
      "Prefill a seeded random prompt as one member of a context-parallel group of processes "
      "(--cp N), or alone (--cp 1); prints the times as JSON");
  cmd->add_option("-m,--model", o->model_path, "GGUF model file")->required();
  cmd->add_option("--cp", o->members, "Members of the group (1 = one process alone)")
      ->check(CLI::Range(1, 16));
  cmd->add_option("--rank", o->rank, "This member (0 listens for the others)");
  cmd->add_option("--listen", o->listen, "HOST:PORT of this member's ring (port 0: a free one)");
  cmd->add_option("--join", o->join, "Member 0's HOST:PORT (members 1..N-1)");
  cmd->add_option("--tokens", o->tokens, "Prompt length")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--seed", o->seed, "The prompt's random seed");
  cmd->add_option("--rounds", o->rounds, "Prefills of the same prompt, each timed")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--kv-type", o->kv_type, "KV cache element type: f32, f16 or q8_0")
      ->check(CLI::IsMember(kv_type_names()));
  cmd->add_option("--decode", o->decode,
                  "Greedy tokens to generate after the prefill (decode with the KV sharded)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag(
      "--no-overlap", o->no_overlap,
      "Finish each ring hop's transfers before computing (to measure what overlap hides)");
  cmd->add_option("--timeout", o->timeout_s, "Seconds to wait for the others, at start and per hop")
      ->check(CLI::Range(1, 86400));
  add_compute_options(cmd, &o->compute);
  return cmd;
}

int run_cp_prefill(const CpPrefillOptions& opts) {
  const Status st = cp_prefill(opts);
  if (st.ok()) return 0;
  std::fprintf(stderr, "keel cp-prefill: %s\n", st.message().c_str());
  return 1;
}

}  // namespace keel::cli
