// FakeKubeApi: a stand-in Kubernetes API server for tests, on a free loopback port (plain HTTP,
// Boost.Beast, one thread per connection; stopped — listener closed, connections shut down,
// threads joined — when destroyed). It serves what `kubectl apply --validate=false` and the scale
// client ask for, and records every request (method, path, Content-Type, Authorization, body):
//   - discovery: /version, /api, /api/v1, /apis and the group versions of apps, policy and
//     rbac.authorization.k8s.io (plain APIVersions/APIGroupList/APIResourceList; kubectl falls
//     back to them from aggregated discovery);
//   - objects: GET of an unknown object → 404 Status; POST to a collection → 201, the object
//     stored under collection/metadata.name (409 when it exists); GET of a stored object → 200;
//   - a Deployment's scale subresource (…/deployments/NAME/scale): GET → a Scale from the stored
//     Deployment's spec.replicas; PUT and PATCH (merge patch) set it; 404 without the Deployment.
// Test hooks: require a bearer token (401 otherwise), or answer every scale request with a fixed
// status (a 403 from RBAC, a 503 from an overloaded server).
// Thread safety: all methods may be called from the test thread while connections are served.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace keel::testing {

struct RecordedRequest {
  std::string method;
  std::string path;   // without the query
  std::string query;  // after '?', "" when none
  std::string content_type;
  std::string authorization;  // the Authorization header as sent
  std::string body;
};

class FakeKubeApi {
 public:
  // nullptr with `error` set when no port could be bound.
  static std::unique_ptr<FakeKubeApi> start(std::string* error);
  ~FakeKubeApi();
  FakeKubeApi(const FakeKubeApi&) = delete;
  FakeKubeApi& operator=(const FakeKubeApi&) = delete;

  // "http://127.0.0.1:PORT".
  std::string url() const;
  int port() const { return port_; }

  std::vector<RecordedRequest> requests() const;
  // Stored objects by their path (e.g. /apis/apps/v1/namespaces/keel/deployments/keel-gateway).
  std::map<std::string, nlohmann::json> objects() const;
  // Stores a Deployment NS/NAME with spec.replicas (what `kubectl apply` would have created).
  void put_deployment(const std::string& ns, const std::string& name, int replicas);
  // Every request must carry "Authorization: Bearer TOKEN" (401 otherwise); "" = any.
  void require_token(const std::string& token);
  // Answer every scale-subresource request with this status (0 = serve it normally).
  void force_scale_status(int status);

 private:
  FakeKubeApi() = default;
  void accept_loop();
  void serve_connection(int fd);
  struct Answer {
    int status = 200;
    std::string body;
  };
  Answer handle(const RecordedRequest& r);
  Answer handle_scale(const RecordedRequest& r, const std::string& deployment_path);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;

  mutable std::mutex mu_;
  std::vector<std::thread> connections_;
  std::set<int> open_fds_;
  std::vector<RecordedRequest> requests_;
  std::map<std::string, nlohmann::json> objects_;
  std::string token_;
  int forced_scale_status_ = 0;
  int64_t next_version_ = 1;
};

}  // namespace keel::testing
