// kube_call (see kube_http.h): one exchange through net's HTTP client under one deadline.
#include "kube/kube_http.h"

#include "net/http_client.h"

namespace keel::kube {

Result<KubeResponse> kube_call(const KubeEndpoint& ep, const KubeRequest& r,
                               std::chrono::milliseconds timeout) {
  net::HttpRequest req;
  req.method = r.method;
  req.url = ep.api;
  req.url.target = r.target;
  req.headers = {{"User-Agent", "keel-autoscaler"}, {"Accept", "application/json"}};
  if (!r.bearer_token.empty())
    req.headers.emplace_back("Authorization", "Bearer " + r.bearer_token);
  if (!r.content_type.empty() && (!r.body.empty() || r.method != "GET")) {
    req.headers.emplace_back("Content-Type", r.content_type);
  }
  req.body = r.body;
  net::HttpOptions options;
  options.timeout = timeout;
  options.scope = net::TimeoutScope::kWholeExchange;  // a dead or silent server never hangs us
  options.ca_file = ep.ca_file;
  options.max_body_bytes = uint64_t{16} << 20;
  Result<net::HttpResponse> answer = net::http_call(req, options);
  if (!answer.ok()) return answer.status().with_prefix("kubernetes API");
  return KubeResponse{answer->head.status, std::move(answer->body)};
}

}  // namespace keel::kube
