// EtcdClient: unary calls to etcd v3's JSON gateway (grpc-gateway: POST /v3/<service>/<method>
// with a JSON body, keys and values in base64, int64s as strings) over plain HTTP/1.1 with
// net's HTTP client. Each call has a deadline (connect + write + read); a call that cannot reach
// any endpoint is retried with exponential backoff over the endpoints in turn, then fails with
// Unavailable naming every endpoint and the last error — a dead etcd never hangs a caller. An
// answer from etcd (HTTP status other than 200) is not retried: its gRPC code maps to a Status
// (NotFound for a missing lease, InvalidArgument, ...).
//
// Thread safety: call() may be used from several threads at once (no shared connection).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace keel::membership {

struct EtcdEndpoint {
  std::string host;
  std::string port;
};

struct EtcdClientConfig {
  std::vector<std::string> endpoints;  // "http://HOST:PORT", at least one
  std::chrono::milliseconds request_timeout{2000};
  int attempts = 4;                        // tries per call, over the endpoints in turn
  std::chrono::milliseconds backoff{100};  // before the 2nd try; doubles, capped at 1 s
};

// "http://HOST:PORT" → host and port; https and anything else → InvalidArgument.
Result<EtcdEndpoint> parse_etcd_endpoint(const std::string& url);
// Comma-separated endpoints (the --etcd-endpoints flag).
Result<std::vector<EtcdEndpoint>> parse_etcd_endpoints(const std::vector<std::string>& urls);

// The first key after every key that starts with `prefix` (etcd's range_end for a prefix).
std::string prefix_range_end(const std::string& prefix);

class EtcdClient {
 public:
  static Result<EtcdClient> create(const EtcdClientConfig& config);

  // POSTs `body` to `path` (e.g. "/v3/kv/range"); the parsed JSON answer.
  Result<nlohmann::json> call(const std::string& path, const nlohmann::json& body) const;
  // Streaming calls (keepalive) answer with one JSON object per line: the first "result".
  Result<nlohmann::json> call_stream_first(const std::string& path,
                                           const nlohmann::json& body) const;

  const std::vector<EtcdEndpoint>& endpoints() const { return endpoints_; }
  const EtcdClientConfig& config() const { return config_; }

 private:
  EtcdClient(EtcdClientConfig config, std::vector<EtcdEndpoint> endpoints)
      : config_(std::move(config)), endpoints_(std::move(endpoints)) {}
  Result<std::string> post_with_retries(const std::string& path, const std::string& body) const;

  EtcdClientConfig config_;
  std::vector<EtcdEndpoint> endpoints_;
};

}  // namespace keel::membership
