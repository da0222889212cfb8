// ScaleClient (see scale_client.h).
#include "kube/scale_client.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>

namespace keel::kube {
namespace {

using Json = nlohmann::json;

int32_t int_at(const Json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number_integer()) return 0;
  return obj[key].get<int32_t>();
}

// The API server's Status object's message, when the body is one.
std::string server_message(const std::string& body) {
  const Json j = Json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    return j["message"].get<std::string>();
  }
  return body.substr(0, 200);
}

bool retryable(int status) { return status == 429 || status >= 500; }

}  // namespace

Result<DeploymentScale> parse_scale(const std::string& body) {
  const Json j = Json::parse(body, nullptr, false);
  if (!j.is_object() || j.value("kind", "") != "Scale" || !j.contains("spec") ||
      !j["spec"].is_object()) {
    return Status::corrupt("kubernetes: not a Scale object: " + body.substr(0, 200));
  }
  DeploymentScale s;
  s.spec_replicas = int_at(j["spec"], "replicas");
  if (j.contains("status")) s.status_replicas = int_at(j["status"], "replicas");
  if (j.contains("metadata") && j["metadata"].is_object()) {
    s.resource_version = j["metadata"].value("resourceVersion", "");
  }
  return s;
}

ScaleClient::ScaleClient(KubeConfig kube, ScaleClientConfig config)
    : kube_(std::move(kube)), config_(config) {}

std::string ScaleClient::scale_path(const std::string& deployment) const {
  return "/apis/apps/v1/namespaces/" + kube_.namespace_name + "/deployments/" + deployment +
         "/scale";
}

Result<KubeResponse> ScaleClient::call_with_retries(const KubeRequest& request) const {
  const KubeEndpoint ep{kube_.api, kube_.ca_file};
  std::chrono::milliseconds backoff = config_.backoff;
  Status last;
  const int attempts = std::max(1, config_.attempts);
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    }
    Result<KubeResponse> r = kube_call(ep, request, config_.request_timeout);
    if (r.ok() && !retryable(r->status)) return r;
    last = r.ok() ? Status::unavailable("HTTP " + std::to_string(r->status) + ": " +
                                        server_message(r->body))
                  : r.status();
  }
  return Status::unavailable(request.method + " " + request.target + " failed (" +
                             std::to_string(attempts) + " tries): " + last.message());
}

Result<DeploymentScale> ScaleClient::answer(const std::string& deployment,
                                            const KubeResponse& r) const {
  const std::string name = "deployment " + kube_.namespace_name + "/" + deployment;
  switch (r.status) {
    case 200:
    case 201:
      return parse_scale(r.body);
    case 401:
      return Status::invalid_argument("kubernetes: " + name +
                                      ": 401 Unauthorized: the service-account token was rejected");
    case 403:
      return Status::invalid_argument(
          "kubernetes: " + name + ": 403 Forbidden: " + server_message(r.body) +
          " (the service account needs get and patch on deployments/scale: deploy/10-rbac.yaml)");
    case 404:
      return Status::not_found("kubernetes: " + name + " not found");
    default:
      return Status::internal("kubernetes: " + name + ": HTTP " + std::to_string(r.status) + ": " +
                              server_message(r.body));
  }
}

Result<DeploymentScale> ScaleClient::get_scale(const std::string& deployment) const {
  KubeRequest req;
  req.method = "GET";
  req.target = scale_path(deployment);
  req.bearer_token = kube_.token;
  KEEL_ASSIGN_OR_RETURN(KubeResponse r, call_with_retries(req));
  return answer(deployment, r);
}

Result<DeploymentScale> ScaleClient::set_replicas(const std::string& deployment,
                                                  int32_t replicas) const {
  if (replicas < 0) return Status::invalid_argument("kubernetes: negative replica count");
  KubeRequest req;
  req.method = "PATCH";
  req.target = scale_path(deployment);
  req.content_type = "application/merge-patch+json";
  req.body = Json{{"spec", {{"replicas", replicas}}}}.dump();
  req.bearer_token = kube_.token;
  KEEL_ASSIGN_OR_RETURN(KubeResponse r, call_with_retries(req));
  return answer(deployment, r);
}

}  // namespace keel::kube
