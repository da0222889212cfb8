// load_kube_config (see kube_config.h).
#include "kube/kube_config.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace keel::kube {
namespace {

Result<std::string> read_trimmed(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error(what + ": cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return Status::invalid_argument(what + ": " + path + " is empty");
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool exists(const std::string& path) { return std::ifstream(path).good(); }

Result<net::Url> api_url(const KubeConfigOverrides& o, const EnvLookup& env) {
  std::string text = o.api_url;
  if (text.empty()) {
    const std::optional<std::string> host = env("KUBERNETES_SERVICE_HOST");
    const std::optional<std::string> port = env("KUBERNETES_SERVICE_PORT");
    if (!host || host->empty()) {
      return Status::invalid_argument(
          "kubernetes: no API server: not in a pod (KUBERNETES_SERVICE_HOST is unset) and no "
          "--k8s-api");
    }
    const bool v6 = host->find(':') != std::string::npos;
    text = "https://" + (v6 ? "[" + *host + "]" : *host) + ":" + (port ? *port : "443");
  }
  KEEL_ASSIGN_OR_RETURN(net::Url url, net::parse_url(text));
  if (url.target != "/") {
    return Status::invalid_argument("kubernetes: API URL '" + text +
                                    "' must be scheme://HOST[:PORT] without a path");
  }
  return url;
}

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Result<KubeConfig> load_kube_config(const KubeConfigOverrides& o, const EnvLookup& env) {
  KubeConfig c;
  KEEL_ASSIGN_OR_RETURN(c.api, api_url(o, env));
  const std::string dir = o.service_account_dir;
  const std::string token_file = o.token_file.empty() ? dir + "/token" : o.token_file;
  KEEL_ASSIGN_OR_RETURN(c.token, read_trimmed(token_file, "kubernetes: service-account token"));
  if (!o.namespace_name.empty()) {
    c.namespace_name = o.namespace_name;
  } else {
    KEEL_ASSIGN_OR_RETURN(
        c.namespace_name,
        read_trimmed(dir + "/namespace", "kubernetes: namespace (or --k8s-namespace)"));
  }
  if (c.api.https && exists(dir + "/ca.crt")) c.ca_file = dir + "/ca.crt";
  return c;
}

}  // namespace keel::kube
