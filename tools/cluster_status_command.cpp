// `keel cluster status`: GET /v1/cluster/status from a gateway and print the fleet — one line per
// task executor (role, health, queue, KV use, prefix-cache hit rate) and the job and router
// counters — or the raw JSON with --json.
#include <cstdio>
#include <string>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "cluster_commands.h"

namespace keel::cli {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using Json = nlohmann::json;

struct Url {
  std::string host, port;
};

Result<Url> parse_url(const std::string& url) {
  std::string rest = url;
  if (rest.starts_with("http://")) rest = rest.substr(7);
  if (const size_t slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  const size_t colon = rest.rfind(':');
  if (rest.empty()) return Status::invalid_argument("bad --url \"" + url + "\"");
  if (colon == std::string::npos) return Url{rest, "80"};
  return Url{rest.substr(0, colon), rest.substr(colon + 1)};
}

Result<std::string> http_get(const Url& url, const std::string& target) {
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    boost::beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(10));
    stream.connect(resolver.resolve(url.host, url.port));
    http::request<http::empty_body> req(http::verb::get, target, 11);
    req.set(http::field::host, url.host);
    http::write(stream, req);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    if (res.result_int() != 200) {
      return Status::unavailable("GET " + target + ": HTTP " + std::to_string(res.result_int()) +
                                 " " + res.body());
    }
    return res.body();
  } catch (const std::exception& e) {
    return Status::unavailable("cannot reach the gateway at " + url.host + ":" + url.port + ": " +
                               e.what());
  }
}

void print_table(const Json& doc) {
  std::printf("%-8s %-22s %-10s %-7s %7s %7s %9s %9s %8s\n", "TE", "address", "role", "health",
              "waiting", "running", "pending", "kv_usage", "hit_rate");
  for (const Json& te : doc.value("task_executors", Json::array())) {
    std::printf("%-8s %-22s %-10s %-7s %7lld %7lld %9lld %8.1f%% %7.1f%%\n",
                te.value("id", "").c_str(), te.value("address", "").c_str(),
                te.value("role", "").c_str(), te.value("healthy", false) ? "ok" : "dead",
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
}

}  // namespace

int run_cluster_status(const ClusterStatusOptions& opts) {
  Result<Url> url = parse_url(opts.url);
  if (!url.ok()) return report_error(url.status());
  Result<std::string> body = http_get(*url, "/v1/cluster/status");
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
