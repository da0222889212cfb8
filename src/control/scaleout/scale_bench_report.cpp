// The scale-out bench's summaries and text: plain arithmetic over bind replies, JSON and printf.
#include "control/scaleout/scale_bench_report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <map>

namespace keel::control {
namespace {

using Json = cluster::Json;

// printf into `out`.
[[gnu::format(printf, 2, 3)]] void appendf(std::string* out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n > 0) {
    const size_t at = out->size();
    out->resize(at + static_cast<size_t>(n) + 1);
    std::vsnprintf(out->data() + at, static_cast<size_t>(n) + 1, format, again);
    out->resize(at + static_cast<size_t>(n));
  }
  va_end(again);
}

// The fork's fields of a fork run's summary.
void add_fork_rates(const std::vector<double>& fork_seconds, uint64_t fork_bytes, int forked,
                    Json* out) {
  (*out)["forked"] = forked;
  (*out)["fork_seconds"] = fork_seconds;  // per TE, in chain order
  if (fork_seconds.empty()) return;
  (*out)["fork_bytes"] = fork_bytes;
  // TE 0's hop alone, and the whole chain (its last TE has every byte) as one rate.
  (*out)["fork_gbps_first"] = static_cast<double>(fork_bytes) / fork_seconds.front() * 1e-9;
  (*out)["fork_gbps_chain"] = static_cast<double>(fork_bytes) /
                              *std::max_element(fork_seconds.begin(), fork_seconds.end()) * 1e-9;
}

void append_run_text(const Json& run, int tes, std::string* out) {
  if (!run.contains("time_to_all_ready_s")) {
    appendf(out, "%-6s all %d TEs failed\n", run["mode"].get<std::string>().c_str(), tes);
    return;
  }
  appendf(out,
          "%-6s ready %.3f s, decision->first token min %.3f / median %.3f s "
          "(from store %d, failed %d)\n",
          run["mode"].get<std::string>().c_str(), run["time_to_all_ready_s"].get<double>(),
          run["decision_to_first_token_s"]["min"].get<double>(),
          run["decision_to_first_token_s"]["median"].get<double>(), run["from_store"].get<int>(),
          run["failed"].get<int>());
  appendf(out, "       phases (median s): %s\n", run["phase_median_s"].dump().c_str());
  if (!run.contains("fork_gbps_first")) return;
  appendf(out,
          "       fork: %d forked, %.3f GB/s first hop, %.3f GB/s whole chain; probe %.3f GB/s "
          "(first hop %.0f %%, chain %.0f %% of the probe)\n",
          run["forked"].get<int>(), run["fork_gbps_first"].get<double>(),
          run["fork_gbps_chain"].get<double>(), run["probe"].value("gbps", 0.0),
          100 * run.value("fork_vs_probe_first", 0.0), 100 * run.value("fork_vs_probe_chain", 0.0));
  appendf(out,
          "       entry probe %.3f GB/s (first hop %.0f %%, chain %.0f %% of the entry probe); "
          "fresh shared pages written at %.3f GB/s (first hop %.0f %% of that)\n",
          run["probe_entry"].value("gbps", 0.0), 100 * run.value("fork_vs_entry_probe_first", 0.0),
          100 * run.value("fork_vs_entry_probe_chain", 0.0), run["fresh_pages"].value("gbps", 0.0),
          100 * run.value("fork_vs_fresh_pages_first", 0.0));
}

}  // namespace

Result<std::vector<std::string>> parse_scale_modes(const std::string& modes) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= modes.size();) {
    const size_t comma = std::min(modes.find(',', at), modes.size());
    const std::string m = modes.substr(at, comma - at);
    if (m != "cold" && m != "store" && m != "fork") {
      return Status::invalid_argument("--modes: '" + m + "' is not cold, store or fork");
    }
    out.push_back(m);
    at = comma + 1;
  }
  return out;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Json summarize_scale_out(const std::string& mode, int64_t decision_ns,
                         const std::vector<Result<BoundTe>>& tes) {
  Json out = {{"mode", mode}, {"tes", tes.size()}};
  std::vector<double> first_token, ready, fork_seconds;
  std::map<std::string, std::vector<double>> phases;
  int failed = 0, from_store = 0, forked = 0;
  uint64_t fork_bytes = 0;
  for (const Result<BoundTe>& r : tes) {
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
    const Json secs = cluster::phase_seconds(p);  // items() borrows: keep the object alive
    for (const auto& [k, v] : secs.items()) phases[k].push_back(v.get<double>());
  }
  out["failed"] = failed;
  out["from_store"] = from_store;
  if (mode == "fork") add_fork_rates(fork_seconds, fork_bytes, forked, &out);
  if (!ready.empty()) {
    out["time_to_all_ready_s"] = *std::max_element(ready.begin(), ready.end());
    out["decision_to_first_token_s"] = {
        {"min", *std::min_element(first_token.begin(), first_token.end())},
        {"median", median_of(first_token)},
        {"max", *std::max_element(first_token.begin(), first_token.end())}};
    for (auto& [k, v] : phases) out["phase_median_s"][k] = median_of(v);
  }
  return out;
}

void add_fork_ratio(const Json& yardstick, const std::string& prefix, bool chain, Json* summary) {
  if (!summary->contains("fork_gbps_first") || !yardstick.contains("gbps")) return;
  const double y = yardstick["gbps"].get<double>();
  (*summary)[prefix + "_first"] = (*summary)["fork_gbps_first"].get<double>() / y;
  if (chain) (*summary)[prefix + "_chain"] = (*summary)["fork_gbps_chain"].get<double>() / y;
}

std::string scale_bench_text(const Json& report) {
  std::string out;
  const int tes = report["tes"].get<int>();
  appendf(&out, "model %s, %d TEs x %d threads, %s\n", report["model"].get<std::string>().c_str(),
          tes, report["threads_per_te"].get<int>(), report["isa"].get<std::string>().c_str());
  for (const Json& run : report["runs"]) append_run_text(run, tes, &out);
  return out;
}

}  // namespace keel::control
