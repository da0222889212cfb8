// `keel cluster bench-scale`: measures scale-outs of N task executors on this machine — time from
// the decision to N ready TEs and from the decision to a TE's first token — for each path:
//   cold   a new `keel te` process per TE, started at the decision, reading the GGUF after
//          posix_fadvise(POSIX_FADV_DONTNEED) dropped it from the page cache
//   store  warm-pool TEs (started before, no model) bound at the decision, mapping the model's
//          entry from the model store (built before the decision by a preload)
//   fork   warm-pool TEs each with its own empty store directory (a host without the entry),
//          bound at the decision to fork the entry from a running TE (bound from the store
//          before the decision) by chain relay — TE 0 from the source, TE i from TE i-1 while
//          it receives — then map it. Reported with the fork's bandwidth against two probes, the
//          source pushing as many bytes to this process over the same transfer service, which
//          drops them: "probe" one cached chunk of zeros again and again (the transport alone),
//          "probe_entry" the entry's own bytes from the source's mapping (what a fork moves,
//          without the target's writes) — and against this host's rate of writing as many bytes
//          into fresh shared memory ("fresh_pages": a new file in the store directory, mapped and
//          written chunk by chunk, as a fork's target fills its entry). With
//          --source-netns the source runs in another network namespace at --source-host (another
//          host as far as the network goes): bench/fork_hosts.sh.
// A TE's "first token" is its warm-up token (bind_model.h's post-load phase), generated on the
// bound engine before it announces itself; the decision is taken in this process. Both use the
// steady clock, which every process of a host shares.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "builtin_models.h"
#include "cluster/protocol/bind_model.h"
#include "cluster/weights/weights_fork.h"
#include "cluster_commands.h"
#include "control/scaleout/scale_out_metrics.h"
#include "control/scaleout/warm_pool.h"
#include "core/cpu_features.h"
#include "core/file_system.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "proc/process_supervisor.h"
#include "self_exe.h"
#include "store/model_store.h"

namespace keel::cli {
namespace {

using Json = nlohmann::json;

// A warm TE's spec, listening on `host`.
cluster::TeSpec warm_te_spec(const ClusterBenchScaleOptions& o, const std::string& isa,
                             const std::string& store_dir, const std::string& host) {
  cluster::TeSpec spec;
  spec.warm = true;
  spec.host = host;
  spec.threads = o.threads_per_te;
  spec.isa = isa;
  spec.store_dir = store_dir;
  spec.engine.ctx_size = o.ctx_size;
  spec.engine.kv_cache_bytes = o.kv_cache_bytes;
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

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The summary of one scale-out (and its event-log lines).
Json summarize(const std::string& mode, int64_t decision_ns,
               const std::vector<Result<control::BoundTe>>& tes, std::ofstream* log) {
  Json out = {{"mode", mode}, {"tes", tes.size()}};
  std::vector<double> first_token, ready;
  std::map<std::string, std::vector<double>> phases;
  int failed = 0, from_store = 0, forked = 0;
  std::vector<double> fork_seconds;
  uint64_t fork_bytes = 0;
  for (const Result<control::BoundTe>& r : tes) {
    if (!r.ok()) {
      ++failed;
      out["errors"].push_back(r.status().to_string());
      continue;
    }
    const cluster::ScaleOutPhases& p = r->reply.phases;
    first_token.push_back(static_cast<double>(p.first_token_ns - decision_ns) * 1e-9);
    ready.push_back(static_cast<double>(p.announced_ns - decision_ns) * 1e-9);
    from_store += r->reply.from_store ? 1 : 0;
    if (r->reply.forked) {
      ++forked;
      fork_seconds.push_back(r->reply.fork_seconds);
      fork_bytes = r->reply.fork_bytes;
    } else if (!r->reply.fork_error.empty()) {
      out["fork_errors"].push_back(r->reply.fork_error);
    }
    const Json secs = cluster::phase_seconds(p);
    for (const auto& [k, v] : secs.items()) phases[k].push_back(v.get<double>());
    if (log != nullptr) {
      Json event = control::scale_out_event(r->name, r->pid, r->address, r->reply);
      event["mode"] = mode;
      *log << event.dump() << "\n";
    }
  }
  out["failed"] = failed;
  out["from_store"] = from_store;
  if (mode == "fork") {
    out["forked"] = forked;
    out["fork_seconds"] = fork_seconds;  // per TE, in chain order
    if (!fork_seconds.empty()) {
      out["fork_bytes"] = fork_bytes;
      // TE 0's hop alone, and the whole chain (its last TE has every byte) as one rate.
      out["fork_gbps_first"] = static_cast<double>(fork_bytes) / fork_seconds.front() * 1e-9;
      out["fork_gbps_chain"] = static_cast<double>(fork_bytes) /
                               *std::max_element(fork_seconds.begin(), fork_seconds.end()) * 1e-9;
    }
  }
  if (!ready.empty()) {
    out["time_to_all_ready_s"] = *std::max_element(ready.begin(), ready.end());
    out["decision_to_first_token_s"] = {
        {"min", *std::min_element(first_token.begin(), first_token.end())},
        {"median", median(first_token)},
        {"max", *std::max_element(first_token.begin(), first_token.end())}};
    for (auto& [k, v] : phases) out["phase_median_s"][k] = median(v);
  }
  return out;
}

// The fork's source: a warm TE (on the bench's store, which holds the entry) bound from the
// store before the decision — a running TE serving its mapping.
Result<control::BoundTe> start_fork_source(const ClusterBenchScaleOptions& o,
                                           const std::string& isa, const std::string& path,
                                           const store::PreloadResult& entry,
                                           proc::ProcessSupervisor* sup) {
  control::WarmPoolConfig wc;
  wc.host = o.source_host.empty() ? o.host : o.source_host;
  wc.keel_command = {self_exe()};
  wc.spec = warm_te_spec(o, isa, o.store_dir, wc.host);
  if (!o.source_netns.empty()) {  // `ip netns exec` execs the TE: its PID is the TE's
    wc.keel_command.insert(wc.keel_command.begin(), {ip_binary(), "netns", "exec", o.source_netns});
  }
  wc.name_prefix = "fork-source";
  wc.start_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.start_timeout_s * 1000));
  control::WarmPool pool(sup, wc);
  KEEL_TRY(pool.refill(1));
  cluster::BindModel bind;
  bind.model_path = path;
  bind.store_entry = store::entry_name(entry.key);
  bind.decision_ns = cluster::steady_now_ns();
  std::vector<Result<control::BoundTe>> bound = pool.bind(1, bind);
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
Json probe_link(const ClusterBenchScaleOptions& o, const std::string& source, uint64_t bytes,
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

// The fork's bandwidth over a yardstick's ({"gbps"}; none when it failed): `<prefix>_first` for
// the first hop and, with `chain`, `<prefix>_chain` for the whole chain.
void fork_ratio(const Json& yardstick, const std::string& prefix, bool chain, Json* summary) {
  if (!summary->contains("fork_gbps_first") || !yardstick.contains("gbps")) return;
  const double y = yardstick["gbps"].get<double>();
  (*summary)[prefix + "_first"] = (*summary)["fork_gbps_first"].get<double>() / y;
  if (chain) (*summary)[prefix + "_chain"] = (*summary)["fork_gbps_chain"].get<double>() / y;
}

Result<Json> run_mode(const ClusterBenchScaleOptions& o, const std::string& mode,
                      const std::string& path, const std::string& isa,
                      const store::PreloadResult* entry, std::ofstream* log) {
  proc::SupervisorOptions so;
  if (!o.verbose) so.sink = [](std::string_view, std::string_view) {};
  proc::ProcessSupervisor sup(so);
  control::WarmPoolConfig wc;
  wc.host = o.host;
  wc.keel_command = {self_exe()};
  wc.spec = warm_te_spec(o, isa, mode == "store" ? o.store_dir : "", wc.host);
  wc.name_prefix = mode + "-te";
  wc.start_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.start_timeout_s * 1000));
  std::string fork_root;
  if (mode == "fork") {
    fork_root = o.store_dir + "/keel-bench-fork-" + std::to_string(::getpid());
    wc.store_root = fork_root;  // a store per target TE: hosts without the entry
  }
  control::WarmPool pool(&sup, wc);
  cluster::BindModel bind;
  bind.model_path = path;
  std::vector<Result<control::BoundTe>> tes;
  int64_t decision = 0;
  Json probe;
  Json probe_entry;
  Json fresh_pages;
  if (mode == "fork") {
    Result<control::BoundTe> source = start_fork_source(o, isa, path, *entry, &sup);
    if (!source.ok()) {
      (void)sup.stop_all(std::chrono::milliseconds(5000));
      return source.status();
    }
    probe = probe_link(o, source->weights_address, entry->bytes);
    probe_entry =
        probe_link(o, source->weights_address, entry->bytes, store::entry_name(entry->key));
    fresh_pages = probe_fresh_pages(o.store_dir, entry->bytes);
    KEEL_TRY(pool.refill(o.tes));
    bind.store_entry = store::entry_name(entry->key);
    bind.fork_from = source->weights_address;
    decision = bind.decision_ns = cluster::steady_now_ns();
    tes = pool.bind_chain(o.tes, bind);
  } else if (mode == "cold") {
    KEEL_TRY(drop_page_cache(path));
    decision = bind.decision_ns = cluster::steady_now_ns();
    tes = pool.start_and_bind(o.tes, bind);
  } else {
    KEEL_TRY(pool.refill(o.tes));  // the warm pool, before the decision
    bind.store_entry = store::entry_name(entry->key);
    decision = bind.decision_ns = cluster::steady_now_ns();
    tes = pool.bind(o.tes, bind);
  }
  Json summary = summarize(mode, decision, tes, log);
  (void)sup.stop_all(std::chrono::milliseconds(5000));
  if (!fork_root.empty()) {
    summary["probe"] = probe;
    summary["probe_entry"] = probe_entry;
    summary["fresh_pages"] = fresh_pages;
    fork_ratio(probe, "fork_vs_probe", true, &summary);
    fork_ratio(probe_entry, "fork_vs_entry_probe", true, &summary);
    fork_ratio(fresh_pages, "fork_vs_fresh_pages", false, &summary);
    std::error_code ec;
    std::filesystem::remove_all(fork_root, ec);  // the directory this run made, by its name
  }
  return summary;
}

Status bench_main(const ClusterBenchScaleOptions& o) {
  KEEL_ASSIGN_OR_RETURN(kernels::Isa isa_choice,
                        o.isa.empty() ? kernels::choose_isa_from_env(detect_cpu_features())
                                      : kernels::choose_isa(detect_cpu_features(), o.isa));
  const std::string isa(kernels::isa_name(isa_choice));
  std::string path;
  {
    ThreadPool pool(1);
    KEEL_ASSIGN_OR_RETURN(path, resolve_model_path(o.model_path, pool));
  }
  std::vector<std::string> modes;
  for (size_t at = 0; at <= o.modes.size();) {
    const size_t comma = std::min(o.modes.find(',', at), o.modes.size());
    const std::string m = o.modes.substr(at, comma - at);
    if (m != "cold" && m != "store" && m != "fork") {
      return Status::invalid_argument("--modes: '" + m + "' is not cold, store or fork");
    }
    modes.push_back(m);
    at = comma + 1;
  }
  std::optional<std::ofstream> log;
  if (!o.event_log.empty()) {
    log.emplace(o.event_log, std::ios::app);
    if (!*log) return Status::io_error(o.event_log + ": cannot open the event log");
  }
  PosixFileSystem fs;
  store::SealedHolder sealed;  // the entry lives while this process does, unless --keep-entry
  store::ModelStore store({o.store_dir, 0}, &fs, o.keep_entry ? nullptr : &sealed);
  std::optional<store::PreloadResult> entry;
  Json report = {{"model", path}, {"model_bytes", std::filesystem::file_size(path)},
                 {"tes", o.tes},  {"threads_per_te", o.threads_per_te},
                 {"isa", isa},    {"runs", Json::array()}};
  if (std::find(modes.begin(), modes.end(), "store") != modes.end() ||
      std::find(modes.begin(), modes.end(), "fork") != modes.end()) {
    const store::StoreConfig config{o.store_dir, 0};
    KEEL_TRY(config.validate());
    KEEL_ASSIGN_OR_RETURN(entry, store.preload(path, isa));
    report["preload"] = {{"entry", entry->path},
                         {"bytes", entry->bytes},
                         {"seconds", entry->seconds},
                         {"already_present", entry->already_present}};
  }
  for (const std::string& m : modes) {
    KEEL_ASSIGN_OR_RETURN(
        Json run, run_mode(o, m, path, isa, entry ? &*entry : nullptr, log ? &*log : nullptr));
    report["runs"].push_back(run);
  }
  if (entry && !entry->already_present && !o.keep_entry) (void)store.remove(entry->key);
  if (o.json) {
    std::printf("%s\n", report.dump(2).c_str());
    return {};
  }
  std::printf("model %s, %d TEs x %d threads, %s\n", path.c_str(), o.tes, o.threads_per_te,
              isa.c_str());
  for (const Json& run : report["runs"]) {
    if (!run.contains("time_to_all_ready_s")) {
      std::printf("%-6s all %d TEs failed\n", run["mode"].get<std::string>().c_str(), o.tes);
      continue;
    }
    std::printf(
        "%-6s ready %.3f s, decision->first token min %.3f / median %.3f s "
        "(from store %d, failed %d)\n",
        run["mode"].get<std::string>().c_str(), run["time_to_all_ready_s"].get<double>(),
        run["decision_to_first_token_s"]["min"].get<double>(),
        run["decision_to_first_token_s"]["median"].get<double>(), run["from_store"].get<int>(),
        run["failed"].get<int>());
    std::printf("       phases (median s): %s\n", run["phase_median_s"].dump().c_str());
    if (run.contains("fork_gbps_first")) {
      std::printf(
          "       fork: %d forked, %.3f GB/s first hop, %.3f GB/s whole chain; probe %.3f GB/s "
          "(first hop %.0f %%, chain %.0f %% of the probe)\n",
          run["forked"].get<int>(), run["fork_gbps_first"].get<double>(),
          run["fork_gbps_chain"].get<double>(), run["probe"].value("gbps", 0.0),
          100 * run.value("fork_vs_probe_first", 0.0), 100 * run.value("fork_vs_probe_chain", 0.0));
      std::printf(
          "       entry probe %.3f GB/s (first hop %.0f %%, chain %.0f %% of the entry probe); "
          "fresh shared pages written at %.3f GB/s (first hop %.0f %% of that)\n",
          run["probe_entry"].value("gbps", 0.0), 100 * run.value("fork_vs_entry_probe_first", 0.0),
          100 * run.value("fork_vs_entry_probe_chain", 0.0), run["fresh_pages"].value("gbps", 0.0),
          100 * run.value("fork_vs_fresh_pages_first", 0.0));
    }
  }
  return {};
}

}  // namespace

int run_cluster_bench_scale(const ClusterBenchScaleOptions& opts) {
  const Status s = bench_main(opts);
  return s.ok() ? 0 : report_error(s);
}

}  // namespace keel::cli
