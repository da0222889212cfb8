// load_kube_config: the in-cluster sources (environment, service-account files), the flags that
// override them, and the errors when a piece is missing.
#include "kube/kube_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "support/test_support.h"

namespace keel::kube {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(KubeConfig, InClusterFromEnvironmentAndServiceAccountFiles) {
  const std::string dir = testing::make_temp_dir("kube-sa");
  write(dir + "/token", "tok-123\n");
  write(dir + "/namespace", "keel");
  write(dir + "/ca.crt", "not read here");
  KubeConfigOverrides o;
  o.service_account_dir = dir;
  Result<KubeConfig> c = load_kube_config(
      o, env_of({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"KUBERNETES_SERVICE_PORT", "6443"}}));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->api.https);
  EXPECT_EQ(c->api.host, "10.0.0.1");
  EXPECT_EQ(c->api.port, 6443);
  EXPECT_EQ(c->token, "tok-123");
  EXPECT_EQ(c->namespace_name, "keel");
  EXPECT_EQ(c->ca_file, dir + "/ca.crt");
}

TEST(KubeConfig, IPv6ServiceHostIsBracketed) {
  const std::string dir = testing::make_temp_dir("kube-sa6");
  write(dir + "/token", "t");
  write(dir + "/namespace", "ns");
  KubeConfigOverrides o;
  o.service_account_dir = dir;
  Result<KubeConfig> c = load_kube_config(o, env_of({{"KUBERNETES_SERVICE_HOST", "fd00::1"}}));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->api.host, "fd00::1");
  EXPECT_EQ(c->api.port, 443);
}

TEST(KubeConfig, FlagsOverrideEverything) {
  const std::string dir = testing::make_temp_dir("kube-flags");
  write(dir + "/my-token", "  secret \n");
  KubeConfigOverrides o;
  o.api_url = "http://127.0.0.1:9443";
  o.token_file = dir + "/my-token";
  o.namespace_name = "prod";
  o.service_account_dir = dir + "/absent";
  Result<KubeConfig> c = load_kube_config(o, env_of({}));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->api.https);
  EXPECT_EQ(c->api.port, 9443);
  EXPECT_EQ(c->token, "secret");
  EXPECT_EQ(c->namespace_name, "prod");
  EXPECT_EQ(c->ca_file, "");
}

TEST(KubeConfig, MissingPiecesAreNamed) {
  const std::string dir = testing::make_temp_dir("kube-missing");
  KubeConfigOverrides o;
  o.service_account_dir = dir;
  Result<KubeConfig> c = load_kube_config(o, env_of({}));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("KUBERNETES_SERVICE_HOST"), std::string::npos);

  o.api_url = "http://127.0.0.1:1";
  c = load_kube_config(o, env_of({}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kIoError);
  EXPECT_NE(c.status().message().find(dir + "/token"), std::string::npos);

  write(dir + "/token", "t");
  c = load_kube_config(o, env_of({}));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--k8s-namespace"), std::string::npos);

  write(dir + "/namespace", "\n");
  c = load_kube_config(o, env_of({}));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("is empty"), std::string::npos);
}

TEST(KubeConfig, BadApiUrls) {
  const std::string dir = testing::make_temp_dir("kube-url");
  write(dir + "/token", "t");
  write(dir + "/namespace", "n");
  KubeConfigOverrides o;
  o.service_account_dir = dir;
  for (const char* bad : {"ftp://x:1", "http://", "http://h:99999", "http://h:1/some/path"}) {
    o.api_url = bad;
    EXPECT_FALSE(load_kube_config(o, env_of({})).ok()) << bad;
  }
}

}  // namespace
}  // namespace keel::kube
