// ScaleClient against the fake API server: the requests it sends for a scale-up and a scale-down
// (path, method, Content-Type, body, bearer token), and its errors — 403 (RBAC), 401, 404, a
// server that keeps answering 503, a dead server and a silent one (Unavailable after bounded
// retries, each call within its deadline).
#include "kube/scale_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "support/fake_kube_api.h"

namespace keel::kube {
namespace {

using testing::FakeKubeApi;
using testing::RecordedRequest;
constexpr const char* kScalePath = "/apis/apps/v1/namespaces/keel/deployments/te/scale";

KubeConfig config_for(const std::string& url, const std::string& token = "sa-token") {
  Result<net::Url> u = net::parse_url(url);
  EXPECT_TRUE(u.ok());
  return KubeConfig{*u, token, "keel", ""};
}

ScaleClientConfig fast() {
  ScaleClientConfig c;
  c.request_timeout = std::chrono::milliseconds(1000);
  c.attempts = 3;
  c.backoff = std::chrono::milliseconds(10);
  return c;
}

class ScaleClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    api_ = FakeKubeApi::start(&error);
    ASSERT_TRUE(api_) << error;
    api_->put_deployment("keel", "te", 1);
    api_->require_token("sa-token");
  }
  std::unique_ptr<FakeKubeApi> api_;
};

TEST_F(ScaleClientTest, ScaleUpAndDownSendMergePatchesWithTheToken) {
  ScaleClient client(config_for(api_->url()), fast());
  EXPECT_EQ(client.scale_path("te"), kScalePath);
  Result<DeploymentScale> s = client.get_scale("te");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->spec_replicas, 1);

  s = client.set_replicas("te", 3);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->spec_replicas, 3);
  s = client.set_replicas("te", 0);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->spec_replicas, 0);

  const std::vector<RecordedRequest> reqs = api_->requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].method, "GET");
  for (const RecordedRequest& r : reqs) {
    EXPECT_EQ(r.path, kScalePath);
    EXPECT_EQ(r.authorization, "Bearer sa-token");
  }
  const int expected[] = {3, 0};
  for (int i = 0; i < 2; ++i) {
    const RecordedRequest& r = reqs[static_cast<size_t>(i) + 1];
    EXPECT_EQ(r.method, "PATCH");
    EXPECT_EQ(r.content_type, "application/merge-patch+json");
    const nlohmann::json body = nlohmann::json::parse(r.body);
    EXPECT_EQ(body, (nlohmann::json{{"spec", {{"replicas", expected[i]}}}}));
  }
  EXPECT_EQ(api_->objects().at("/apis/apps/v1/namespaces/keel/deployments/te")["spec"]["replicas"],
            0);
}

TEST_F(ScaleClientTest, ForbiddenNamesTheRbacItNeeds) {
  api_->force_scale_status(403);
  ScaleClient client(config_for(api_->url()), fast());
  Result<DeploymentScale> s = client.set_replicas("te", 2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  const std::string m = s.status().message();
  EXPECT_NE(m.find("deployment keel/te"), std::string::npos) << m;
  EXPECT_NE(m.find("403 Forbidden"), std::string::npos) << m;
  EXPECT_NE(m.find("deployments/scale"), std::string::npos) << m;
  EXPECT_EQ(api_->requests().size(), 1u);  // an answer, not retried
}

TEST_F(ScaleClientTest, BadTokenAndMissingDeployment) {
  ScaleClient wrong(config_for(api_->url(), "stale"), fast());
  Result<DeploymentScale> s = wrong.get_scale("te");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("401 Unauthorized"), std::string::npos);

  ScaleClient client(config_for(api_->url()), fast());
  s = client.set_replicas("nope", 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.status().message(), "kubernetes: deployment keel/nope not found");
}

TEST_F(ScaleClientTest, ServerErrorsAreRetriedThenUnavailable) {
  api_->force_scale_status(503);
  ScaleClient client(config_for(api_->url()), fast());
  Result<DeploymentScale> s = client.set_replicas("te", 2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("3 tries"), std::string::npos) << s.status().message();
  EXPECT_EQ(api_->requests().size(), 3u);
}

TEST(ScaleClientDead, DeadServerIsUnavailableNotAHang) {
  std::string error;
  std::string url;
  {
    auto api = FakeKubeApi::start(&error);  // a port that was free, now closed again
    ASSERT_TRUE(api) << error;
    url = api->url();
  }
  ScaleClient client(config_for(url), fast());
  Result<DeploymentScale> s = client.get_scale("te");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("connecting"), std::string::npos) << s.status().message();
}

TEST(ScaleClientDead, SilentServerTimesOut) {
  // A socket that listens but never accepts: the connection completes (the backlog), no answer.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ScaleClientConfig c = fast();
  c.request_timeout = std::chrono::milliseconds(300);
  c.attempts = 2;
  ScaleClient client(config_for("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port))), c);
  Result<DeploymentScale> s = client.get_scale("te");
  ::close(fd);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("timed out after 300 ms"), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("2 tries"), std::string::npos) << s.status().message();
}

TEST(ScaleClientParse, RejectsWhatIsNotAScale) {
  EXPECT_FALSE(parse_scale("{}").ok());
  EXPECT_FALSE(parse_scale("not json").ok());
  EXPECT_FALSE(parse_scale(R"({"kind":"Scale"})").ok());
  Result<DeploymentScale> s =
      parse_scale(R"({"kind":"Scale","metadata":{"resourceVersion":"7"},"spec":{"replicas":2},)"
                  R"("status":{"replicas":1}})");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->spec_replicas, 2);
  EXPECT_EQ(s->status_replicas, 1);
  EXPECT_EQ(s->resource_version, "7");
}

}  // namespace
}  // namespace keel::kube
