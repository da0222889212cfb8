// Request framing (RFC 9112): Transfer-Encoding other than a single final "chunked" is refused
// (400, or 501 for an unsupported coding before it) and the connection closed, so no bytes of a
// body can be read as the next request; Transfer-Encoding on HTTP/1.0 or with Content-Length is
// refused too. Absolute-form targets are accepted.
#include "server/http_framing.h"

#include <gtest/gtest.h>

#include "server_harness.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;

TEST(HttpFramingTest, TransferEncodingRules) {
  EXPECT_FALSE(check_framing(11, {}, true).has_value());
  EXPECT_FALSE(check_framing(11, {"chunked"}, false).has_value());
  EXPECT_FALSE(check_framing(11, {" Chunked "}, false).has_value());
  EXPECT_EQ(check_framing(11, {"xchunked"}, false)->status, 400);
  EXPECT_EQ(check_framing(11, {"gzip"}, false)->status, 400);
  EXPECT_EQ(check_framing(11, {"chunked, gzip"}, false)->status, 400);
  EXPECT_EQ(check_framing(11, {"chunked", "chunked"}, false)->status, 400);
  EXPECT_EQ(check_framing(11, {""}, false)->status, 400);
  EXPECT_EQ(check_framing(11, {"gzip, chunked"}, false)->status, 501);
  EXPECT_EQ(check_framing(11, {"gzip", "chunked"}, false)->status, 501);
  EXPECT_EQ(check_framing(10, {"chunked"}, false)->status, 400);
  EXPECT_EQ(check_framing(11, {"chunked"}, true)->status, 400);
}

TEST(HttpFramingTest, OriginForm) {
  EXPECT_EQ(origin_form("/v1/models?x=1"), "/v1/models?x=1");
  EXPECT_EQ(origin_form("http://127.0.0.1:8080/v1/completions"), "/v1/completions");
  EXPECT_EQ(origin_form("HTTPS://host/v1/x?q=http://y"), "/v1/x?q=http://y");
  EXPECT_EQ(origin_form("http://host"), "/");
  EXPECT_EQ(origin_form("http://host?x"), "/?x");
  EXPECT_EQ(origin_form("ftp://host/x"), "ftp://host/x");
  EXPECT_EQ(origin_form("*"), "*");
  EXPECT_EQ(percent_decode("a%2Fb%zz%4"), "a/b%zz%4");
}

class FramingHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h_.engine().set_script([](const engine::GenerationRequest&) {
      FakeScript s;
      s.tokens = {kHello, kEos};
      return s;
    });
  }
  // Sends `raw`; expects one response of `status`, then the connection closed with nothing more
  // (a smuggled request after it is never answered).
  void expect_refused_and_closed(const std::string& raw, int status) {
    SCOPED_TRACE(raw);
    TestHttpClient c(h_.port());
    ASSERT_TRUE(c.send_raw(raw));
    std::optional<HttpResult> r = c.read_response();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, status) << r->body;
    EXPECT_EQ(r->header("connection"), "close");
    EXPECT_FALSE(c.read_response().has_value()) << "a second response";
    EXPECT_TRUE(c.wait_closed(5000));
  }
  ServerHarness h_;
};

TEST_F(FramingHttpTest, UnknownFinalCodingsAreRefusedAndTheBodyIsNeverARequest) {
  const std::string smuggled = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const char* te : {"xchunked", "gzip", "chunked, identity"}) {
    expect_refused_and_closed(std::string("POST /v1/completions HTTP/1.1\r\nHost: x\r\n") +
                                  "Transfer-Encoding: " + te + "\r\n\r\n" + smuggled,
                              400);
  }
  expect_refused_and_closed(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n"
      "Content-Length: " +
          std::to_string(smuggled.size()) + "\r\n\r\n" + smuggled,
      400);
  expect_refused_and_closed(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, "
      "chunked\r\n\r\n0\r\n\r\n" +
          smuggled,
      501);
  EXPECT_EQ(h_.engine().submitted().size(), 0u);
}

TEST_F(FramingHttpTest, TransferEncodingOnHttp10IsRefused) {
  const std::string body = Json{{"prompt", "x"}, {"max_tokens", 1}}.dump();
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  expect_refused_and_closed(std::string("POST /v1/completions HTTP/1.0\r\nHost: x\r\n") +
                                "Transfer-Encoding: chunked\r\n\r\n" + size + "\r\n" + body +
                                "\r\n0\r\n\r\n",
                            400);
  // The same over HTTP/1.1 is fine.
  TestHttpClient c(h_.port());
  ASSERT_TRUE(c.send_raw(std::string("POST /v1/completions HTTP/1.1\r\nHost: x\r\n") +
                         "Transfer-Encoding: chunked\r\n\r\n" + size + "\r\n" + body +
                         "\r\n0\r\n\r\n"));
  std::optional<HttpResult> r = c.read_response();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(FramingHttpTest, AbsoluteFormTargetsAreRouted) {
  const std::string body = Json{{"prompt", "x"}, {"max_tokens", 1}}.dump();
  TestHttpClient c(h_.port());
  ASSERT_TRUE(c.send_raw("POST http://127.0.0.1:" + std::to_string(h_.port()) +
                         "/v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         "Content-Type: application/json\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body));
  std::optional<HttpResult> r = c.read_response();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200) << r->body;
  ASSERT_TRUE(c.send_raw("GET http://localhost/health HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  r = c.read_response();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200) << r->body;
}

}  // namespace
}  // namespace keel::server::testing
