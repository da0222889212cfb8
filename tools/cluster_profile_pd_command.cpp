// `keel cluster profile-pd`: measures DeepServe's PD heatmap. It starts (as child processes, one
// at a time, stopped by PID) `keel cluster up --colocated 2` and `keel cluster up --prefill 1
// --decode 1`, both with --threads-per-te N (equal total cores); for each cell of the grid
// (cluster/job/pd_profile.h) it sends K requests of that prompt length with the output length
// forced (max_tokens with ignore_eos, greedy; the same prompts on both fleets) through the loadgen,
// and takes each request's end-to-end latency as its JCT. The heatmap — mean JCT colocated / mean
// JCT disaggregated − 1 per cell — is written in pd_heatmap.h's format with provenance keys.
// Children's output is kept (the last lines are printed when something fails) unless --verbose.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <deque>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "builtin_models.h"
#include "cluster/job/pd_profile.h"
#include "cluster_commands.h"
#include "core/file_system.h"
#include "core/thread_pool.h"
#include "gguf/reader.h"
#include "host/engine_host.h"
#include "loadgen/bench_serve.h"
#include "loadgen/metrics.h"
#include "model/hparams.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "self_exe.h"

namespace keel::cli {
namespace {

// The last lines the fleet's processes printed (for error reports). Called from drain threads.
class OutputTail {
 public:
  explicit OutputTail(bool echo) : echo_(echo) {}
  void add(std::string_view name, std::string_view line) {
    std::lock_guard lock(mu_);
    lines_.push_back("[" + std::string(name) + "] " + std::string(line));
    if (lines_.size() > 30) lines_.pop_front();
    if (echo_) std::fprintf(stderr, "%s\n", lines_.back().c_str());
  }
  void print() {
    std::lock_guard lock(mu_);
    if (echo_) return;
    for (const std::string& l : lines_) std::fprintf(stderr, "%s\n", l.c_str());
  }

 private:
  bool echo_;
  std::mutex mu_;
  std::deque<std::string> lines_;
};

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

// Starts `keel cluster up` for `fleet`; returns the gateway's port.
Result<int> start_fleet(proc::ProcessSupervisor& sup, const ClusterProfilePdOptions& o,
                        const std::string& path, const Fleet& fleet) {
  proc::ChildSpec spec;
  spec.name = fleet.name;
  spec.argv = {self_exe(),
               "cluster",
               "up",
               "-m",
               path,
               "--port",
               "0",
               "--jes",
               "1",
               "--threads-per-te",
               std::to_string(o.threads_per_te),
               "--max-num-seqs",
               std::to_string(std::max(o.concurrency, 1)),
               "--start-timeout",
               std::to_string(o.start_timeout_s)};
  if (o.ctx_size > 0) spec.argv.insert(spec.argv.end(), {"-c", std::to_string(o.ctx_size)});
  spec.argv.insert(spec.argv.end(), fleet.flags.begin(), fleet.flags.end());
  spec.ready_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.start_timeout_s * 3000));
  KEEL_ASSIGN_OR_RETURN(proc::Child child, sup.spawn(spec));
  return proc::ready_port(child.ready);
}

// Sends num_prompts requests of one cell's shape (prompts drawn from `seed`) and returns their
// JCTs (end-to-end latency, s); a failed request or an output of other than the forced length
// fails the call.
Result<std::vector<double>> run_cell(int port, const ClusterProfilePdOptions& o, int64_t vocab_size,
                                     const cluster::PdProfileCell& cell, uint64_t seed,
                                     int64_t num_prompts) {
  loadgen::BenchServeConfig c;
  c.base_url = "http://127.0.0.1:" + std::to_string(port);
  c.workload.dataset = loadgen::DatasetKind::kRandom;
  c.workload.format = loadgen::PromptFormat::kTokenIds;
  c.workload.num_prompts = num_prompts;
  c.workload.input_len = cell.prefill_tokens;
  c.workload.output_len = cell.decode_tokens;
  c.workload.vocab_size = vocab_size;
  c.workload.seed = seed;
  c.load.max_concurrency = o.concurrency;
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

Status measure_fleet(const ClusterProfilePdOptions& o, const std::string& path, int64_t vocab_size,
                     const Fleet& fleet, const std::vector<cluster::PdProfileCell>& cells,
                     std::vector<cluster::PdCellSamples>* samples, OutputTail* tail) {
  proc::SupervisorOptions so;
  so.sink = [tail](std::string_view name, std::string_view line) { tail->add(name, line); };
  proc::ProcessSupervisor sup(so);
  KEEL_ASSIGN_OR_RETURN(int port, start_fleet(sup, o, path, fleet));
  std::fprintf(stderr, "profile-pd: %s fleet (%s) up on port %d\n", fleet.name.c_str(),
               joined(fleet.flags).c_str(), port);
  // Warm-up (pages in the weights, opens connections); its prompts differ from the cells'.
  KEEL_TRY(run_cell(port, o, vocab_size, cells.front(), 7919, 2).status());
  for (size_t i = 0; i < cells.size(); ++i) {
    KEEL_ASSIGN_OR_RETURN(std::vector<double> jct,
                          run_cell(port, o, vocab_size, cells[i], 1000 + i, o.requests_per_cell));
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

Status profile_pd(const ClusterProfilePdOptions& o, OutputTail* tail) {
  cluster::PdProfileGrid grid;
  KEEL_ASSIGN_OR_RETURN(grid.prefill_lengths,
                        parse_list<int64_t>(o.prefill_lengths, "--prefill-lengths"));
  KEEL_ASSIGN_OR_RETURN(grid.ratios, parse_list<double>(o.ratios, "--ratios"));
  std::string path;
  {
    ThreadPool pool(1);
    KEEL_ASSIGN_OR_RETURN(path, resolve_model_path(o.model_path, pool));
  }
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile file,
                        gguf::GgufFile::open(path, {.mode = gguf::DataMode::kNone}));
  KEEL_ASSIGN_OR_RETURN(model::HParams hp, model::parse_hparams(file));
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<host::EngineHost> meta, host::EngineHost::open(path));
  const int64_t max_context = o.ctx_size > 0 ? o.ctx_size : hp.n_ctx_train;
  KEEL_ASSIGN_OR_RETURN(std::vector<cluster::PdProfileCell> cells,
                        cluster::plan_pd_profile(grid, max_context));
  std::vector<cluster::PdCellSamples> samples(cells.size());
  const std::vector<Fleet> fleets = {{"colocated", {"--colocated", "2"}},
                                     {"disaggregated", {"--prefill", "1", "--decode", "1"}}};
  for (const Fleet& fleet : fleets) {
    Status s = measure_fleet(o, path, meta->tokenizer().vocab_size(), fleet, cells, &samples, tail);
    if (!s.ok()) return s.with_prefix(fleet.name + " fleet");
  }
  KEEL_ASSIGN_OR_RETURN(cluster::PdHeatmap map, cluster::build_pd_profile(grid, samples));
  cluster::PdProfileProvenance p;
  p.model = std::filesystem::absolute(path).string();
  p.date = utc_now();
  p.threads_per_te = o.threads_per_te;
  p.requests_per_cell = o.requests_per_cell;
  p.concurrency = o.concurrency;
  p.colocated_fleet = joined(fleets[0].flags);
  p.disaggregated_fleet = joined(fleets[1].flags);
  KEEL_TRY(write_text(o.output, cluster::pd_profile_json(map, samples, p)));
  std::fprintf(stderr, "profile-pd: wrote %s (%zu x %zu cells)\n", o.output.c_str(),
               grid.prefill_lengths.size(), grid.ratios.size());
  return Status();
}

}  // namespace

int run_cluster_profile_pd(const ClusterProfilePdOptions& opts) {
  OutputTail tail(opts.verbose);
  const Status s = profile_pd(opts, &tail);
  if (s.ok()) return 0;
  tail.print();
  std::fprintf(stderr, "keel: cluster profile-pd: %s\n", s.to_string().c_str());
  return 1;
}

}  // namespace keel::cli
