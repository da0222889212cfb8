// The PD profile run: two fleets as child `keel cluster up` processes, one after the other, each
// driven cell by cell through the loadgen; the pure grid and heatmap are cluster/job/pd_profile's.
#include "control/profile/pd_profile_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <sstream>

#include "cluster/job/pd_profile.h"
#include "core/file_system.h"
#include "gguf/reader.h"
#include "host/engine_host.h"
#include "loadgen/bench_serve.h"
#include "loadgen/metrics.h"
#include "model/hparams.h"
#include "proc/output_tail.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"

namespace keel::control {
namespace {

template <typename T>
Result<std::vector<T>> parse_list(const std::string& text, const std::string& what) {
  std::vector<T> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    size_t used = 0;
    try {
      if constexpr (std::is_same_v<T, double>) {
        out.push_back(std::stod(item, &used));
      } else {
        out.push_back(static_cast<T>(std::stoll(item, &used)));
      }
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size()) {
      return Status::invalid_argument(what + ": '" + item + "' is not a number");
    }
  }
  return out;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

struct Fleet {
  std::string name;                // "colocated" | "disaggregated"
  std::vector<std::string> flags;  // cluster up's TE flags
};

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// What every step of one run reads.
struct RunContext {
  const PdProfileConfig& config;
  const std::vector<std::string>& keel_command;
  int64_t vocab_size = 0;
};

// Starts `keel cluster up` for `fleet`; returns the gateway's port.
Result<int> start_fleet(proc::ProcessSupervisor& sup, const RunContext& ctx, const Fleet& fleet) {
  const PdProfileConfig& o = ctx.config;
  proc::ChildSpec spec;
  spec.name = fleet.name;
  spec.argv = ctx.keel_command;
  spec.argv.insert(spec.argv.end(), {"cluster", "up", "-m", o.model_path, "--port", "0", "--jes",
                                     "1", "--threads-per-te", std::to_string(o.threads_per_te),
                                     "--max-num-seqs", std::to_string(std::max(o.concurrency, 1)),
                                     "--start-timeout", std::to_string(o.start_timeout_s)});
  if (o.ctx_size > 0) spec.argv.insert(spec.argv.end(), {"-c", std::to_string(o.ctx_size)});
  spec.argv.insert(spec.argv.end(), fleet.flags.begin(), fleet.flags.end());
  spec.ready_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.start_timeout_s * 3000));
  KEEL_ASSIGN_OR_RETURN(proc::Child child, sup.spawn(spec));
  return proc::ready_port(child.ready);
}

// Sends num_prompts requests of one cell's shape (prompts drawn from `seed`) and returns their
// JCTs (end-to-end latency, s); a failed request or an output of other than the forced length
// fails the call.
Result<std::vector<double>> run_cell(int port, const RunContext& ctx,
                                     const cluster::PdProfileCell& cell, uint64_t seed,
                                     int64_t num_prompts) {
  loadgen::BenchServeConfig c;
  c.base_url = "http://127.0.0.1:" + std::to_string(port);
  c.workload.dataset = loadgen::DatasetKind::kRandom;
  c.workload.format = loadgen::PromptFormat::kTokenIds;
  c.workload.num_prompts = num_prompts;
  c.workload.input_len = cell.prefill_tokens;
  c.workload.output_len = cell.decode_tokens;
  c.workload.vocab_size = ctx.vocab_size;
  c.workload.seed = seed;
  c.load.max_concurrency = ctx.config.concurrency;
  c.load.seed = seed;
  c.temperature = 0.0;
  c.ignore_eos = true;
  c.initial_test = false;
  KEEL_ASSIGN_OR_RETURN(loadgen::BenchServeResult r, loadgen::run_bench_serve(std::move(c)));
  if (r.metrics.failed > 0 || r.metrics.cancelled > 0) {
    const std::string first = r.metrics.first_errors.empty() ? "" : r.metrics.first_errors[0];
    return Status::unavailable(std::to_string(r.metrics.failed) + " requests failed: " + first);
  }
  std::vector<double> jct;
  for (const loadgen::RequestRecord& rec : r.records) {
    const int64_t out = loadgen::output_tokens_of(rec);
    if (out != cell.decode_tokens) {
      return Status::internal("a request returned " + std::to_string(out) +
                              " tokens, not the forced " + std::to_string(cell.decode_tokens));
    }
    jct.push_back(rec.latency_s);
  }
  return jct;
}

// Starts `fleet`, measures every cell on it into its side of `samples`, and stops it.
Status measure_fleet(const RunContext& ctx, const Fleet& fleet,
                     const std::vector<cluster::PdProfileCell>& cells,
                     std::vector<cluster::PdCellSamples>* samples, proc::OutputTail* tail) {
  proc::SupervisorOptions so;
  so.sink = [tail](std::string_view name, std::string_view line) { tail->add(name, line); };
  proc::ProcessSupervisor sup(so);
  KEEL_ASSIGN_OR_RETURN(int port, start_fleet(sup, ctx, fleet));
  std::fprintf(stderr, "profile-pd: %s fleet (%s) up on port %d\n", fleet.name.c_str(),
               joined(fleet.flags).c_str(), port);
  // Warm-up (pages in the weights, opens connections); its prompts differ from the cells'.
  KEEL_TRY(run_cell(port, ctx, cells.front(), 7919, 2).status());
  for (size_t i = 0; i < cells.size(); ++i) {
    KEEL_ASSIGN_OR_RETURN(std::vector<double> jct,
                          run_cell(port, ctx, cells[i], 1000 + i, ctx.config.requests_per_cell));
    double sum = 0.0;
    for (double s : jct) sum += s;
    std::fprintf(stderr, "profile-pd: %s prefill %lld decode %lld: mean JCT %.1f ms\n",
                 fleet.name.c_str(), static_cast<long long>(cells[i].prefill_tokens),
                 static_cast<long long>(cells[i].decode_tokens),
                 1000.0 * sum / static_cast<double>(jct.size()));
    auto& dst = fleet.name == "colocated" ? (*samples)[i].colocated_jct_s
                                          : (*samples)[i].disaggregated_jct_s;
    dst = std::move(jct);
  }
  KEEL_TRY(sup.stop(fleet.name, std::chrono::milliseconds(20000)).status());
  return Status();
}

// Writes through a temporary file renamed into place (as PdHeatmap::save does).
Status write_text(const std::string& path, const std::string& text) {
  PosixFileSystem fs;
  const std::string tmp = path + ".tmp";
  {
    KEEL_ASSIGN_OR_RETURN(auto file, fs.open_writable(tmp));
    const auto* bytes = reinterpret_cast<const std::byte*>(text.data());
    KEEL_TRY(file->append({bytes, text.size()}).with_prefix(tmp));
    KEEL_TRY(file->close().with_prefix(tmp));
  }
  return fs.rename(tmp, path).with_prefix(path);
}

Result<cluster::PdHeatmap> profile(const PdProfileConfig& o,
                                   const std::vector<std::string>& keel_command,
                                   proc::OutputTail* tail) {
  cluster::PdProfileGrid grid;
  KEEL_ASSIGN_OR_RETURN(grid.prefill_lengths,
                        parse_list<int64_t>(o.prefill_lengths, "--prefill-lengths"));
  KEEL_ASSIGN_OR_RETURN(grid.ratios, parse_list<double>(o.ratios, "--ratios"));
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file,
                        gguf::GgufFile::open(o.model_path, {.mode = gguf::DataMode::kNone}));
  KEEL_ASSIGN_OR_RETURN(model::HParams hp, model::parse_hparams(file));
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<host::EngineHost> meta,
                        host::EngineHost::open(o.model_path));
  const int64_t max_context = o.ctx_size > 0 ? o.ctx_size : hp.n_ctx_train;
  KEEL_ASSIGN_OR_RETURN(std::vector<cluster::PdProfileCell> cells,
                        cluster::plan_pd_profile(grid, max_context));
  std::vector<cluster::PdCellSamples> samples(cells.size());
  const std::vector<Fleet> fleets = {{"colocated", {"--colocated", "2"}},
                                     {"disaggregated", {"--prefill", "1", "--decode", "1"}}};
  const RunContext ctx{o, keel_command, meta->tokenizer().vocab_size()};
  for (const Fleet& fleet : fleets) {
    Status s = measure_fleet(ctx, fleet, cells, &samples, tail);
    if (!s.ok()) return s.with_prefix(fleet.name + " fleet");
  }
  KEEL_ASSIGN_OR_RETURN(cluster::PdHeatmap map, cluster::build_pd_profile(grid, samples));
  cluster::PdProfileProvenance p;
  p.model = std::filesystem::absolute(o.model_path).string();
  p.date = utc_now();
  p.threads_per_te = o.threads_per_te;
  p.requests_per_cell = o.requests_per_cell;
  p.concurrency = o.concurrency;
  p.colocated_fleet = joined(fleets[0].flags);
  p.disaggregated_fleet = joined(fleets[1].flags);
  KEEL_TRY(write_text(o.output, cluster::pd_profile_json(map, samples, p)));
  std::fprintf(stderr, "profile-pd: wrote %s (%zu x %zu cells)\n", o.output.c_str(),
               grid.prefill_lengths.size(), grid.ratios.size());
  return map;
}

}  // namespace

Result<cluster::PdHeatmap> run_pd_profile(const PdProfileConfig& config,
                                          const std::vector<std::string>& keel_command) {
  proc::OutputTail tail(config.verbose);
  Result<cluster::PdHeatmap> map = profile(config, keel_command, &tail);
  if (!map.ok()) tail.print();
  return map;
}

}  // namespace keel::control
