// FakeKubeApi (see fake_kube_api.h): a poll()ed listening socket, and per connection a thread
// reading requests with Beast until the client closes (kubectl keeps connections alive).
#include "support/fake_kube_api.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>

#include <utility>  // before Boost: asio/awaitable.hpp in Boost 1.74 misses this include

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace keel::testing {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Json = nlohmann::json;

Json resource(const std::string& name, const std::string& kind, bool namespaced) {
  std::string singular = kind;
  for (char& c : singular) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return {{"name", name},
          {"singularName", singular},
          {"namespaced", namespaced},
          {"kind", kind},
          {"verbs", {"create", "delete", "get", "list", "patch", "update", "watch"}}};
}

Json resource_list(const std::string& group_version, Json resources) {
  return {{"kind", "APIResourceList"},
          {"apiVersion", "v1"},
          {"groupVersion", group_version},
          {"resources", std::move(resources)}};
}

Json group(const std::string& name) {
  const Json gv = {{"groupVersion", name + "/v1"}, {"version", "v1"}};
  return {{"name", name}, {"versions", {gv}}, {"preferredVersion", gv}};
}

// The discovery documents by path.
const std::map<std::string, Json>& discovery() {
  static const std::map<std::string, Json> docs = {
      {"/version", {{"major", "1"}, {"minor", "32"}, {"gitVersion", "v1.32.0-keel-fake"}}},
      {"/api", {{"kind", "APIVersions"}, {"versions", {"v1"}}}},
      {"/apis",
       {{"kind", "APIGroupList"},
        {"apiVersion", "v1"},
        {"groups", {group("apps"), group("policy"), group("rbac.authorization.k8s.io")}}}},
      {"/api/v1",
       resource_list(
           "v1", {resource("namespaces", "Namespace", false), resource("services", "Service", true),
                  resource("serviceaccounts", "ServiceAccount", true),
                  resource("configmaps", "ConfigMap", true), resource("pods", "Pod", true)})},
      {"/apis/apps/v1", resource_list("apps/v1", {resource("deployments", "Deployment", true),
                                                  {{"name", "deployments/scale"},
                                                   {"namespaced", true},
                                                   {"group", "autoscaling"},
                                                   {"version", "v1"},
                                                   {"kind", "Scale"},
                                                   {"verbs", {"get", "patch", "update"}}},
                                                  resource("statefulsets", "StatefulSet", true)})},
      {"/apis/policy/v1",
       resource_list("policy/v1", {resource("poddisruptionbudgets", "PodDisruptionBudget", true)})},
      {"/apis/rbac.authorization.k8s.io/v1",
       resource_list(
           "rbac.authorization.k8s.io/v1",
           {resource("roles", "Role", true), resource("rolebindings", "RoleBinding", true),
            resource("clusterroles", "ClusterRole", false),
            resource("clusterrolebindings", "ClusterRoleBinding", false)})},
  };
  return docs;
}

std::string status_body(int code, const std::string& reason, const std::string& message) {
  return Json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
              {"reason", reason}, {"code", code},       {"message", message}}
      .dump();
}

}  // namespace

std::unique_ptr<FakeKubeApi> FakeKubeApi::start(std::string* error) {
  std::unique_ptr<FakeKubeApi> api(new FakeKubeApi());
  api->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;  // a free port
  socklen_t len = sizeof(addr);
  if (api->listen_fd_ < 0 ||
      ::bind(api->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(api->listen_fd_, 64) != 0 ||
      ::getsockname(api->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *error = std::string("fake kube API: cannot listen on loopback: ") + std::strerror(errno);
    return nullptr;
  }
  api->port_ = ntohs(addr.sin_port);
  api->acceptor_ = std::thread([a = api.get()] { a->accept_loop(); });
  return api;
}

FakeKubeApi::~FakeKubeApi() {
  stopping_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes blocked reads
    threads.swap(connections_);
  }
  for (std::thread& t : threads) t.join();
}

std::string FakeKubeApi::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

void FakeKubeApi::accept_loop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mu_);
    open_fds_.insert(fd);
    connections_.emplace_back([this, fd] { serve_connection(fd); });
  }
}

void FakeKubeApi::serve_connection(int fd) {
  net::io_context ioc;
  net::ip::tcp::socket sock(ioc);
  boost::system::error_code ec;
  sock.assign(net::ip::tcp::v4(), fd, ec);
  beast::flat_buffer buffer;
  while (!ec && !stopping_) {
    http::request<http::string_body> req;
    http::read(sock, buffer, req, ec);
    if (ec) break;
    RecordedRequest r;
    r.method = std::string(req.method_string());
    const std::string target(req.target());
    const size_t q = target.find('?');
    r.path = target.substr(0, q);
    r.query = q == std::string::npos ? "" : target.substr(q + 1);
    r.content_type = std::string(req[http::field::content_type]);
    r.authorization = std::string(req[http::field::authorization]);
    r.body = req.body();
    const Answer a = handle(r);
    http::response<http::string_body> res{static_cast<http::status>(a.status), 11};
    res.set(http::field::content_type, "application/json");
    res.keep_alive(req.keep_alive());
    res.body() = a.body;
    res.prepare_payload();
    http::write(sock, res, ec);
    if (!req.keep_alive()) break;
  }
  {
    std::lock_guard lock(mu_);
    open_fds_.erase(fd);
  }
  sock.close(ec);  // closes fd
}

FakeKubeApi::Answer FakeKubeApi::handle(const RecordedRequest& r) {
  std::lock_guard lock(mu_);
  requests_.push_back(r);
  if (!token_.empty() && r.authorization != "Bearer " + token_) {
    return {401, status_body(401, "Unauthorized", "Unauthorized")};
  }
  static const std::string kScale = "/scale";
  if (r.path.size() > kScale.size() && r.path.ends_with(kScale)) {
    return handle_scale(r, r.path.substr(0, r.path.size() - kScale.size()));
  }
  if (r.method == "GET") {
    if (auto d = discovery().find(r.path); d != discovery().end()) return {200, d->second.dump()};
    if (auto o = objects_.find(r.path); o != objects_.end()) return {200, o->second.dump()};
    return {404, status_body(404, "NotFound", r.path + " not found")};
  }
  if (r.method == "POST") {
    Json obj = Json::parse(r.body, nullptr, false);
    if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object() ||
        !obj["metadata"].contains("name") || !obj["metadata"]["name"].is_string()) {
      return {400, status_body(400, "BadRequest", "no metadata.name")};
    }
    const std::string path = r.path + "/" + obj["metadata"]["name"].get<std::string>();
    if (objects_.count(path) != 0) return {409, status_body(409, "AlreadyExists", path)};
    obj["metadata"]["resourceVersion"] = std::to_string(next_version_++);
    obj["metadata"]["uid"] = "uid-" + obj["metadata"]["resourceVersion"].get<std::string>();
    objects_[path] = obj;
    return {201, obj.dump()};
  }
  return {405, status_body(405, "MethodNotAllowed", r.method + " " + r.path)};
}

FakeKubeApi::Answer FakeKubeApi::handle_scale(const RecordedRequest& r,
                                              const std::string& deployment_path) {
  if (forced_scale_status_ != 0) {
    return {forced_scale_status_,
            status_body(forced_scale_status_, "Forced",
                        "deployments.apps/scale is forbidden: User \"system:serviceaccount:keel:"
                        "default\" cannot " +
                            r.method + " resource \"deployments/scale\"")};
  }
  auto it = objects_.find(deployment_path);
  if (it == objects_.end()) {
    return {404, status_body(404, "NotFound", deployment_path + " not found")};
  }
  Json& dep = it->second;
  if (r.method == "PUT" || r.method == "PATCH") {
    const Json body = Json::parse(r.body, nullptr, false);
    if (!body.is_object() || !body.contains("spec") || !body["spec"].is_object() ||
        !body["spec"].contains("replicas") || !body["spec"]["replicas"].is_number_integer()) {
      return {422, status_body(422, "Invalid", "spec.replicas missing")};
    }
    dep["spec"]["replicas"] = body["spec"]["replicas"];
    dep["metadata"]["resourceVersion"] = std::to_string(next_version_++);
  } else if (r.method != "GET") {
    return {405, status_body(405, "MethodNotAllowed", r.method)};
  }
  const int replicas = dep["spec"].value("replicas", 1);
  const Json scale = {{"kind", "Scale"},
                      {"apiVersion", "autoscaling/v1"},
                      {"metadata",
                       {{"name", dep["metadata"]["name"]},
                        {"namespace", dep["metadata"].value("namespace", "")},
                        {"resourceVersion", dep["metadata"]["resourceVersion"]}}},
                      {"spec", {{"replicas", replicas}}},
                      {"status", {{"replicas", replicas}}}};
  return {200, scale.dump()};
}

std::vector<RecordedRequest> FakeKubeApi::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

std::map<std::string, nlohmann::json> FakeKubeApi::objects() const {
  std::lock_guard lock(mu_);
  return objects_;
}

void FakeKubeApi::put_deployment(const std::string& ns, const std::string& name, int replicas) {
  std::lock_guard lock(mu_);
  objects_["/apis/apps/v1/namespaces/" + ns + "/deployments/" + name] = {
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata",
       {{"name", name}, {"namespace", ns}, {"resourceVersion", std::to_string(next_version_++)}}},
      {"spec", {{"replicas", replicas}}}};
}

void FakeKubeApi::require_token(const std::string& token) {
  std::lock_guard lock(mu_);
  token_ = token;
}

void FakeKubeApi::force_scale_status(int status) {
  std::lock_guard lock(mu_);
  forced_scale_status_ = status;
}

}  // namespace keel::testing
