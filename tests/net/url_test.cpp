// parse_url and resolve_location: accepted shapes, defaults, and each rejection.
#include "net/url.h"

#include <gtest/gtest.h>

namespace keel::net {
namespace {

TEST(UrlTest, ParsesSchemesHostsPortsAndTargets) {
  Result<Url> u = parse_url("https://huggingface.co/org/repo/resolve/main/m.gguf?x=1#frag");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_TRUE(u->https);
  EXPECT_EQ(u->host, "huggingface.co");
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->target, "/org/repo/resolve/main/m.gguf?x=1");
  u = parse_url("http://127.0.0.1:8080");
  ASSERT_TRUE(u.ok());
  EXPECT_FALSE(u->https);
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->target, "/");
  EXPECT_EQ(u->str(), "http://127.0.0.1:8080/");
  u = parse_url("http://[::1]:9/a");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->str(), "http://[::1]:9/a");
}

TEST(UrlTest, RejectsWhatItDoesNotSupport) {
  for (const char* bad :
       {"ftp://x/y", "x/y", "http://", "http://:80/a", "http://h:0/", "http://h:70000/",
        "http://h:8a/", "http://u@h/", "http://h/a b", "http://[::1/a"}) {
    EXPECT_EQ(parse_url(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(UrlTest, ResolvesRedirectLocations) {
  const Url base = *parse_url("https://a.example/x/y");
  Result<Url> r = resolve_location(base, "/z?sig=1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->str(), "https://a.example/z?sig=1");
  r = resolve_location(base, "http://cdn.example:81/f");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->str(), "http://cdn.example:81/f");
  EXPECT_FALSE(resolve_location(base, "relative/path").ok());
  EXPECT_FALSE(resolve_location(base, "//other/host").ok());
}

}  // namespace
}  // namespace keel::net
