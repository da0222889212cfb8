// EtcdClient; see etcd_client.h. One connection per call (net's HTTP client, Connection: close):
// a control plane's few calls a second do not need pooling, and no state survives a failed call.
#include "membership/etcd_client.h"

#include <sstream>
#include <thread>

#include "net/http_client.h"

namespace keel::membership {
namespace {

// The answer to one POST: HTTP status and body, or a transport error.
struct HttpAnswer {
  int status = 0;
  std::string body;
};

Result<HttpAnswer> post_once(const EtcdEndpoint& ep, const std::string& path,
                             const std::string& body, std::chrono::milliseconds timeout) {
  net::HttpRequest req;
  req.method = "POST";
  req.url.host = ep.host;
  req.url.port = static_cast<uint16_t>(std::stoi(ep.port));  // checked by parse_etcd_endpoint
  req.url.target = path;
  req.headers = {{"Content-Type", "application/json"}};
  req.body = body;
  net::HttpOptions options;
  options.timeout = timeout;
  options.scope = net::TimeoutScope::kWholeExchange;  // connect + write + read
  options.max_body_bytes = uint64_t{64} << 20;
  KEEL_ASSIGN_OR_RETURN(net::HttpResponse answer, net::http_call(req, options));
  return HttpAnswer{answer.head.status, std::move(answer.body)};
}

// A gateway error body {"error": ..., "code": N, "message": ...} as a Status.
Status etcd_error(int http_status, const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  std::string msg = body.substr(0, 300);
  int code = -1;
  if (j.is_object()) {
    if (j.contains("message") && j["message"].is_string()) msg = j["message"].get<std::string>();
    if (j.contains("error") && j["error"].is_string()) msg = j["error"].get<std::string>();
    if (j.contains("code") && j["code"].is_number_integer()) code = j["code"].get<int>();
  }
  msg = "etcd: " + msg + " (HTTP " + std::to_string(http_status) + ")";
  switch (code) {
    case 3:
      return Status::invalid_argument(msg);
    case 5:
      return Status::not_found(msg);
    case 14:
      return Status::unavailable(msg);
    default:
      return Status::internal(msg);
  }
}

}  // namespace

Result<EtcdEndpoint> parse_etcd_endpoint(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    return Status::invalid_argument("etcd endpoint '" + url +
                                    "' must be http://HOST:PORT (https is not supported)");
  }
  std::string rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size() ||
      rest.find('/') != std::string::npos) {
    return Status::invalid_argument("etcd endpoint '" + url + "' must be http://HOST:PORT");
  }
  const std::string port = rest.substr(colon + 1);
  for (char c : port) {
    if (c < '0' || c > '9') {
      return Status::invalid_argument("etcd endpoint '" + url + "': port is not a number");
    }
  }
  if (port.size() > 5 || std::stoi(port) == 0 || std::stoi(port) > 65535) {
    return Status::invalid_argument("etcd endpoint '" + url + "': port out of range");
  }
  return EtcdEndpoint{rest.substr(0, colon), port};
}

Result<std::vector<EtcdEndpoint>> parse_etcd_endpoints(const std::vector<std::string>& urls) {
  if (urls.empty()) return Status::invalid_argument("no etcd endpoint given");
  std::vector<EtcdEndpoint> out;
  for (const std::string& u : urls) {
    KEEL_ASSIGN_OR_RETURN(EtcdEndpoint e, parse_etcd_endpoint(u));
    out.push_back(std::move(e));
  }
  return out;
}

std::string prefix_range_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

Result<EtcdClient> EtcdClient::create(const EtcdClientConfig& config) {
  KEEL_ASSIGN_OR_RETURN(std::vector<EtcdEndpoint> eps, parse_etcd_endpoints(config.endpoints));
  if (config.attempts < 1 || config.request_timeout.count() <= 0) {
    return Status::invalid_argument("etcd client: attempts and request timeout must be positive");
  }
  return EtcdClient(config, std::move(eps));
}

Result<std::string> EtcdClient::post_with_retries(const std::string& path,
                                                  const std::string& body) const {
  std::chrono::milliseconds backoff = config_.backoff;
  Status last;
  for (int attempt = 0; attempt < config_.attempts; ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
    const EtcdEndpoint& ep = endpoints_[static_cast<size_t>(attempt) % endpoints_.size()];
    Result<HttpAnswer> a = post_once(ep, path, body, config_.request_timeout);
    if (!a.ok()) {
      last = a.status();
      continue;
    }
    if (a->status == 200) return std::move(a->body);
    return etcd_error(a->status, a->body).with_prefix(path);
  }
  std::string names;
  for (const EtcdEndpoint& e : endpoints_)
    names += (names.empty() ? "" : ", ") + e.host + ":" + e.port;
  return Status::unavailable("etcd at " + names + " unreachable (" +
                             std::to_string(config_.attempts) + " tries): " + last.message());
}

Result<nlohmann::json> EtcdClient::call(const std::string& path, const nlohmann::json& body) const {
  KEEL_ASSIGN_OR_RETURN(std::string text, post_with_retries(path, body.dump()));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) {
    return Status::corrupt(path + ": etcd answered with non-JSON: " + text.substr(0, 200));
  }
  return j;
}

Result<nlohmann::json> EtcdClient::call_stream_first(const std::string& path,
                                                     const nlohmann::json& body) const {
  KEEL_ASSIGN_OR_RETURN(std::string text, post_with_retries(path, body.dump()));
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    if (j.contains("error")) {
      const nlohmann::json& e = j["error"];
      return etcd_error(200, e.is_object() ? e.dump() : line).with_prefix(path);
    }
    if (j.contains("result")) return j["result"];
  }
  return Status::corrupt(path + ": no result in etcd's stream: " + text.substr(0, 200));
}

}  // namespace keel::membership
