// KubeConfig: where the Kubernetes API is and who this process is to it — the in-cluster
// configuration every pod gets (KUBERNETES_SERVICE_HOST/PORT, the service-account token, CA and
// namespace files under /var/run/secrets/kubernetes.io/serviceaccount), each part overridable
// (the --k8s-api, --k8s-token-file, --k8s-namespace flags; tests point them at a fake server).
// Invariants of a loaded config: api is http or https with a host and port; token and
// namespace_name are non-empty (the token without surrounding whitespace).
// Thread safety: plain values; load_kube_config reads files and the given environment only.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "core/result.h"
#include "net/url.h"

namespace keel::kube {

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

struct KubeConfig {
  net::Url api;                // the API server's base (target "/")
  std::string token;           // the bearer token
  std::string namespace_name;  // the namespace of the objects addressed
  std::string ca_file;         // https: the CA bundle that signs the API server ("" = system's)
};

// What the flags set; an empty field falls back to the in-cluster value.
struct KubeConfigOverrides {
  std::string api_url;                                   // --k8s-api http(s)://HOST:PORT
  std::string token_file;                                // --k8s-token-file
  std::string namespace_name;                            // --k8s-namespace
  std::string service_account_dir = kServiceAccountDir;  // where token, ca.crt, namespace are
};

// Looks up an environment variable (std::getenv in production, a map in tests).
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

// The overrides first, then the in-cluster sources. InvalidArgument naming the missing piece and
// where it was looked for (not in a pod and no flag), or a malformed URL; IoError for an
// unreadable file.
Result<KubeConfig> load_kube_config(const KubeConfigOverrides& overrides, const EnvLookup& env);

}  // namespace keel::kube
