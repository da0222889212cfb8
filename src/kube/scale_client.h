// ScaleClient: reads and sets a Deployment's replica count through its scale subresource,
// /apis/apps/v1/namespaces/NS/deployments/NAME/scale — GET for the current count, PATCH with
// application/merge-patch+json {"spec":{"replicas":N}} to set it — as the service account the
// KubeConfig names (Bearer token; RBAC: get/patch on deployments/scale, deploy/10-rbac.yaml).
// Errors, each naming the deployment and the namespace:
//   401        InvalidArgument "... 401 Unauthorized: the service-account token was rejected"
//   403        InvalidArgument "... 403 Forbidden: ... needs get and patch on deployments/scale"
//   404        NotFound "deployment NS/NAME not found"
//   5xx, 429, transport failures: retried (attempts, backoff doubling from `backoff`, capped at
//              2 s; every call bounded by `request_timeout`), then Unavailable with the last error.
// Thread safety: const methods, no shared state; usable from several threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/result.h"
#include "kube/kube_config.h"
#include "kube/kube_http.h"

namespace keel::kube {

// A Deployment's scale as the API server reports it (autoscaling/v1 Scale).
struct DeploymentScale {
  int32_t spec_replicas = 0;    // desired (what set_replicas writes)
  int32_t status_replicas = 0;  // pods that exist now
  std::string resource_version;
};

struct ScaleClientConfig {
  std::chrono::milliseconds request_timeout{5000};
  int attempts = 4;
  std::chrono::milliseconds backoff{200};
};

class ScaleClient {
 public:
  ScaleClient(KubeConfig kube, ScaleClientConfig config);

  // "/apis/apps/v1/namespaces/NS/deployments/NAME/scale".
  [[nodiscard]] std::string scale_path(const std::string& deployment) const;
  Result<DeploymentScale> get_scale(const std::string& deployment) const;
  // Sets spec.replicas (n >= 0); returns the scale the server answered with.
  Result<DeploymentScale> set_replicas(const std::string& deployment, int32_t replicas) const;

 private:
  Result<KubeResponse> call_with_retries(const KubeRequest& request) const;
  Result<DeploymentScale> answer(const std::string& deployment, const KubeResponse& r) const;

  KubeConfig kube_;
  ScaleClientConfig config_;
};

// A Scale object's JSON → DeploymentScale (Corrupt when it is not one).
Result<DeploymentScale> parse_scale(const std::string& body);

}  // namespace keel::kube
