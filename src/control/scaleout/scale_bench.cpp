// The scale-out bench: a warm pool (or cold starts) per mode under its own supervisor, the store
// entry built before the decision, the fork's probes, and the event log; summaries are
// scale_bench_report's.
#include "control/scaleout/scale_bench.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "cluster/protocol/bind_model.h"
#include "cluster/weights/weights_fork.h"
#include "control/scaleout/scale_bench_report.h"
#include "control/scaleout/scale_out_metrics.h"
#include "control/scaleout/warm_pool.h"
#include "core/cpu_features.h"
#include "core/file_system.h"
#include "kernels/kernels.h"
#include "proc/process_supervisor.h"
#include "store/model_store.h"

namespace keel::control {
namespace {

using Json = cluster::Json;

// What every step of one bench reads.
struct BenchContext {
  const ScaleBenchConfig& config;
  const std::vector<std::string>& keel_command;
  std::string isa;   // the kernel table's name
  std::string path;  // the model file
};

// A warm TE's spec, listening on `host`.
cluster::TeSpec warm_te_spec(const BenchContext& ctx, const std::string& store_dir,
                             const std::string& host) {
  cluster::TeSpec spec;
  spec.warm = true;
  spec.host = host;
  spec.threads = ctx.config.threads_per_te;
  spec.isa = ctx.isa;
  spec.store_dir = store_dir;
  spec.engine.ctx_size = ctx.config.ctx_size;
  spec.engine.kv_cache_bytes = ctx.config.kv_cache_bytes;
  return spec;
}

// iproute2's `ip`, by absolute path (the supervisor execs without a PATH search).
std::string ip_binary() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "/usr/sbin/ip";
}

Status drop_page_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::io_error(path + ": cannot open to drop its cached pages");
  const int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  if (rc != 0) return Status::io_error(path + ": posix_fadvise(DONTNEED) failed");
  return {};
}

// The fork's source: a warm TE (on the bench's store, which holds the entry) bound from the
// store before the decision — a running TE serving its mapping.
Result<BoundTe> start_fork_source(const BenchContext& ctx, const store::PreloadResult& entry,
                                  proc::ProcessSupervisor* sup) {
  const ScaleBenchConfig& o = ctx.config;
  WarmPoolConfig wc;
  wc.host = o.source_host.empty() ? o.host : o.source_host;
  wc.keel_command = ctx.keel_command;
  wc.spec = warm_te_spec(ctx, o.store_dir, wc.host);
  if (!o.source_netns.empty()) {  // `ip netns exec` execs the TE: its PID is the TE's
    wc.keel_command.insert(wc.keel_command.begin(), {ip_binary(), "netns", "exec", o.source_netns});
  }
  wc.name_prefix = "fork-source";
  wc.start_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.start_timeout_s * 1000));
  WarmPool pool(sup, wc);
  KEEL_TRY(pool.refill(1));
  cluster::BindModel bind;
  bind.model_path = ctx.path;
  bind.store_entry = store::entry_name(entry.key);
  bind.decision_ns = cluster::steady_now_ns();
  std::vector<Result<BoundTe>> bound = pool.bind(1, bind);
  if (bound.empty()) return Status::internal("fork source: no warm TE");
  KEEL_TRY(bound[0].status());
  if (bound[0]->weights_address.empty()) {
    return Status::internal("fork source: the TE announced no weights service");
  }
  return std::move(*bound[0]);
}

// The transfer probe: the source pushes `bytes` bytes over the same service to a receiver in this
// process, which drops them — zeros, or with `entry` named that entry's bytes
// ({"bytes","seconds","gbps"}, or {"error"}).
Json probe_link(const ScaleBenchConfig& o, const std::string& source, uint64_t bytes,
                const std::string& entry = "") {
  const std::string dir = o.store_dir + "/keel-bench-probe-" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  Json out;
  {
    Result<std::unique_ptr<cluster::WeightsReceiver>> receiver =
        cluster::WeightsReceiver::start(o.host, dir);
    Result<double> s = receiver.ok() ? cluster::probe_weights_link(
                                           source, receiver->get(), bytes, std::chrono::minutes(2),
                                           cluster::kDefaultWeightsChunkBytes, entry)
                                     : Result<double>(receiver.status());
    if (s.ok()) {
      out = {{"bytes", bytes}, {"seconds", *s}, {"gbps", static_cast<double>(bytes) / *s * 1e-9}};
    } else {
      out = {{"error", s.status().to_string()}};
    }
  }
  std::filesystem::remove_all(dir, ec);
  return out;
}

// The rate of writing `bytes` into fresh shared memory here: a new file in `dir`, sized, mapped
// and written in 4 MiB chunks, as a fork's target fills its entry ({"bytes","seconds","gbps"}, or
// {"error"}). The file is unlinked at once.
Json probe_fresh_pages(const std::string& dir, uint64_t bytes) {
  const std::string path = dir + "/keel-bench-pages-" + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return {{"error", path + ": cannot create"}};
  ::unlink(path.c_str());
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    ::close(fd);
    return {{"error", path + ": cannot size"}};
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return {{"error", path + ": cannot map"}};
  auto* p = static_cast<unsigned char*>(map);
  const int64_t t0 = cluster::steady_now_ns();
  constexpr uint64_t kChunk = uint64_t{4} << 20;
  for (uint64_t off = 0; off < bytes; off += kChunk) {
    std::memset(p + off, static_cast<int>(off >> 22), std::min(kChunk, bytes - off));
  }
  const double seconds = static_cast<double>(cluster::steady_now_ns() - t0) * 1e-9;
  ::munmap(map, bytes);
  return {{"bytes", bytes},
          {"seconds", seconds},
          {"gbps", static_cast<double>(bytes) / seconds * 1e-9}};
}

// The fork's yardsticks, measured against its running source before the decision.
struct ForkYardsticks {
  Json probe;
  Json probe_entry;
  Json fresh_pages;
};

ForkYardsticks measure_yardsticks(const ScaleBenchConfig& o, const BoundTe& source,
                                  const store::PreloadResult& entry) {
  ForkYardsticks y;
  y.probe = probe_link(o, source.weights_address, entry.bytes);
  y.probe_entry = probe_link(o, source.weights_address, entry.bytes, store::entry_name(entry.key));
  y.fresh_pages = probe_fresh_pages(o.store_dir, entry.bytes);
  return y;
}

void add_yardsticks(const ForkYardsticks& y, Json* summary) {
  (*summary)["probe"] = y.probe;
  (*summary)["probe_entry"] = y.probe_entry;
  (*summary)["fresh_pages"] = y.fresh_pages;
  add_fork_ratio(y.probe, "fork_vs_probe", true, summary);
  add_fork_ratio(y.probe_entry, "fork_vs_entry_probe", true, summary);
  add_fork_ratio(y.fresh_pages, "fork_vs_fresh_pages", false, summary);
}

// One event-log line per bound TE.
void log_events(const std::string& mode, const std::vector<Result<BoundTe>>& tes,
                std::ofstream* log) {
  if (log == nullptr) return;
  for (const Result<BoundTe>& r : tes) {
    if (!r.ok()) continue;
    Json event = scale_out_event(r->name, r->pid, r->address, r->reply);
    event["mode"] = mode;
    *log << event.dump() << "\n";
  }
}

Result<Json> run_mode(const BenchContext& ctx, const std::string& mode,
                      const store::PreloadResult* entry, std::ofstream* log) {
  const ScaleBenchConfig& o = ctx.config;
  proc::SupervisorOptions so;
  if (!o.verbose) so.sink = [](std::string_view, std::string_view) {};
  proc::ProcessSupervisor sup(so);
  WarmPoolConfig wc;
  wc.host = o.host;
  wc.keel_command = ctx.keel_command;
  wc.spec = warm_te_spec(ctx, mode == "store" ? o.store_dir : "", wc.host);
  wc.name_prefix = mode + "-te";
  wc.start_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.start_timeout_s * 1000));
  std::string fork_root;
  if (mode == "fork") {
    fork_root = o.store_dir + "/keel-bench-fork-" + std::to_string(::getpid());
    wc.store_root = fork_root;  // a store per target TE: hosts without the entry
  }
  WarmPool pool(&sup, wc);
  cluster::BindModel bind;
  bind.model_path = ctx.path;
  std::vector<Result<BoundTe>> tes;
  ForkYardsticks yardsticks;
  if (mode == "fork") {
    Result<BoundTe> source = start_fork_source(ctx, *entry, &sup);
    if (!source.ok()) {
      (void)sup.stop_all(std::chrono::milliseconds(5000));
      return source.status();
    }
    yardsticks = measure_yardsticks(o, *source, *entry);
    KEEL_TRY(pool.refill(o.tes));
    bind.store_entry = store::entry_name(entry->key);
    bind.fork_from = source->weights_address;
    bind.decision_ns = cluster::steady_now_ns();
    tes = pool.bind_chain(o.tes, bind);
  } else if (mode == "cold") {
    KEEL_TRY(drop_page_cache(ctx.path));
    bind.decision_ns = cluster::steady_now_ns();
    tes = pool.start_and_bind(o.tes, bind);
  } else {
    KEEL_TRY(pool.refill(o.tes));  // the warm pool, before the decision
    bind.store_entry = store::entry_name(entry->key);
    bind.decision_ns = cluster::steady_now_ns();
    tes = pool.bind(o.tes, bind);
  }
  Json summary = summarize_scale_out(mode, bind.decision_ns, tes);
  log_events(mode, tes, log);
  (void)sup.stop_all(std::chrono::milliseconds(5000));
  if (!fork_root.empty()) {
    add_yardsticks(yardsticks, &summary);
    std::error_code ec;
    std::filesystem::remove_all(fork_root, ec);  // the directory this run made, by its name
  }
  return summary;
}

// The store entry store and fork bind from, built before any decision; none for cold alone.
Result<std::optional<store::PreloadResult>> preload_entry(const BenchContext& ctx,
                                                          const std::vector<std::string>& modes,
                                                          store::ModelStore* store, Json* report) {
  if (std::find(modes.begin(), modes.end(), "store") == modes.end() &&
      std::find(modes.begin(), modes.end(), "fork") == modes.end()) {
    return std::optional<store::PreloadResult>();
  }
  const store::StoreConfig config{ctx.config.store_dir, 0};
  KEEL_TRY(config.validate());
  KEEL_ASSIGN_OR_RETURN(store::PreloadResult entry, store->preload(ctx.path, ctx.isa));
  (*report)["preload"] = {{"entry", entry.path},
                          {"bytes", entry.bytes},
                          {"seconds", entry.seconds},
                          {"already_present", entry.already_present}};
  return std::optional<store::PreloadResult>(std::move(entry));
}

}  // namespace

Result<Json> run_scale_bench(const ScaleBenchConfig& o,
                             const std::vector<std::string>& keel_command) {
  KEEL_ASSIGN_OR_RETURN(kernels::Isa isa_choice,
                        o.isa.empty() ? kernels::choose_isa_from_env(detect_cpu_features())
                                      : kernels::choose_isa(detect_cpu_features(), o.isa));
  const BenchContext ctx{o, keel_command, std::string(kernels::isa_name(isa_choice)), o.model_path};
  KEEL_ASSIGN_OR_RETURN(std::vector<std::string> modes, parse_scale_modes(o.modes));
  std::optional<std::ofstream> log;
  if (!o.event_log.empty()) {
    log.emplace(o.event_log, std::ios::app);
    if (!*log) return Status::io_error(o.event_log + ": cannot open the event log");
  }
  PosixFileSystem fs;
  store::SealedHolder sealed;  // the entry lives while this process does, unless keep_entry
  store::ModelStore store({o.store_dir, 0}, &fs, o.keep_entry ? nullptr : &sealed);
  Json report = {{"model", ctx.path}, {"model_bytes", std::filesystem::file_size(ctx.path)},
                 {"tes", o.tes},      {"threads_per_te", o.threads_per_te},
                 {"isa", ctx.isa},    {"runs", Json::array()}};
  KEEL_ASSIGN_OR_RETURN(std::optional<store::PreloadResult> entry,
                        preload_entry(ctx, modes, &store, &report));
  for (const std::string& m : modes) {
    KEEL_ASSIGN_OR_RETURN(Json run,
                          run_mode(ctx, m, entry ? &*entry : nullptr, log ? &*log : nullptr));
    report["runs"].push_back(run);
  }
  if (entry && !entry->already_present && !o.keep_entry) (void)store.remove(entry->key);
  return report;
}

}  // namespace keel::control
