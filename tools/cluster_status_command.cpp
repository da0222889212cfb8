// `keel cluster status`: GET /v1/cluster/status from a gateway and print the fleet — one line per
// task executor (role, state from progress: healthy/busy/hung/dead, queue, KV use, prefix-cache
// hit rate), the job and router counters over all JEs and one line per JE (up or down, and why)
// — or the raw JSON with --json.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster_commands.h"
#include "loadgen/endpoint.h"
#include "loadgen/load_runner.h"

namespace keel::cli {
namespace {

using Json = nlohmann::json;

void print_table(const Json& doc) {
  std::printf("%-8s %-22s %-10s %-7s %7s %7s %9s %9s %8s\n", "TE", "address", "role", "state",
              "waiting", "running", "pending", "kv_usage", "hit_rate");
  for (const Json& te : doc.value("task_executors", Json::array())) {
    // A semi-PD TE is a colocated one whose engine splits prefill and decode: "semi-pd"; a
    // pipelined one spreads its layers over processes: "pp2".
    const int stages = te.value("pipeline_stages", 1);
    const std::string role =
        te.value("engine", "colocated") == "semi-pd"
            ? "semi-pd"
            : (stages > 1 ? "pp" + std::to_string(stages) : te.value("role", ""));
    std::printf("%-8s %-22s %-10s %-7s %7lld %7lld %9lld %8.1f%% %7.1f%%\n",
                te.value("id", "").c_str(), te.value("address", "").c_str(), role.c_str(),
                te.value("state", te.value("healthy", false) ? "healthy" : "dead").c_str(),
                static_cast<long long>(te.value("waiting", 0)),
                static_cast<long long>(te.value("running", 0)),
                static_cast<long long>(te.value("pending_tokens", 0)),
                100.0 * te.value("kv_usage", 0.0), 100.0 * te.value("prefix_hit_rate", 0.0));
  }
  const Json jobs = doc.value("jobs", Json::object());
  std::printf("jobs (%s): active %lld, total %lld, re-driven %lld, failed %lld\n",
              doc.value("je", "").c_str(), static_cast<long long>(jobs.value("active", 0)),
              static_cast<long long>(jobs.value("total", 0)),
              static_cast<long long>(jobs.value("redriven", 0)),
              static_cast<long long>(jobs.value("failed", 0)));
  std::printf("router: %s\n", doc.value("router", Json::object()).dump().c_str());
  // Each JE's own line (the totals above are over all of them); a JE that is down says why.
  for (const Json& je : doc.value("job_executors", Json::array())) {
    if (je.value("state", "") != "up") {
      std::printf("JE %s (%s): down: %s\n", je.value("id", "").c_str(),
                  je.value("address", "").c_str(), je.value("error", "").c_str());
      continue;
    }
    const Json j = je.value("jobs", Json::object());
    std::printf("JE %s (%s): up; active %lld, total %lld, re-driven %lld, failed %lld\n",
                je.value("id", "").c_str(), je.value("address", "").c_str(),
                static_cast<long long>(j.value("active", 0)),
                static_cast<long long>(j.value("total", 0)),
                static_cast<long long>(j.value("redriven", 0)),
                static_cast<long long>(j.value("failed", 0)));
  }
  for (const Json& te : doc.value("task_executors", Json::array())) {
    const Json peer = te.value("peer_tier", Json::object());
    if (peer.value("fetch", 0) + peer.value("recompute", 0) == 0) continue;
    std::printf(
        "peer tier (T3) %s: fetch %lld, recompute %lld, blocks fetched %lld, hit tokens %lld\n",
        te.value("id", "").c_str(), static_cast<long long>(peer.value("fetch", 0)),
        static_cast<long long>(peer.value("recompute", 0)),
        static_cast<long long>(peer.value("blocks_fetched", 0)),
        static_cast<long long>(peer.value("hit_tokens", 0)));
  }
}

}  // namespace

int run_cluster_status(const ClusterStatusOptions& opts) {
  Result<loadgen::HttpTarget> target = loadgen::parse_base_url(opts.url);
  if (!target.ok()) return report_error(target.status());
  loadgen::ClientConfig client;
  client.target = *target;
  client.request_timeout_s = 10.0;
  Result<std::string> body = loadgen::http_get(client, "/v1/cluster/status");
  if (!body.ok()) return report_error(body.status());
  if (opts.json) {
    std::printf("%s\n", body->c_str());
    return 0;
  }
  const Json doc = Json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return report_error(Status::internal("the gateway sent malformed JSON"));
  print_table(doc);
  return 0;
}

}  // namespace keel::cli
