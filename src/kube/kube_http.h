// kube_call(): one HTTP/1.1 request to the Kubernetes API server — a method, a path, an optional
// JSON body and its content type, a bearer token — over plain TCP or TLS (net/http_client.h; the
// server verified against the given CA bundle, or the system's), with one deadline for the whole
// exchange (resolve + connect + handshake + write + read), so a dead or silent server never hangs
// the caller. One connection per call (Connection: close): the autoscaler calls a few times a
// minute.
// Errors: Unavailable for transport failures and timeouts (worth retrying); any HTTP status is an
// answer, returned as is.
// Thread safety: reentrant; each call has its own connection.
#pragma once

#include <chrono>
#include <string>

#include "core/result.h"
#include "net/url.h"

namespace keel::kube {

struct KubeRequest {
  std::string method = "GET";  // GET, PUT, PATCH, POST
  std::string target;          // path and query, from '/'
  std::string content_type;    // with a body: application/json, application/merge-patch+json
  std::string body;
  std::string bearer_token;  // "" = no Authorization header
};

struct KubeResponse {
  int status = 0;
  std::string body;
};

struct KubeEndpoint {
  net::Url api;         // scheme, host, port (its target is ignored)
  std::string ca_file;  // https: CA bundle ("" = the system's store)
};

Result<KubeResponse> kube_call(const KubeEndpoint& endpoint, const KubeRequest& request,
                               std::chrono::milliseconds timeout);

}  // namespace keel::kube
