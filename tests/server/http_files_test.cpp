// /v1/files over real HTTP: upload (multipart), get, content, list (purpose, order, limit,
// after), delete; malformed multipart bodies, wrong purposes, missing parts, unknown ids, the
// per-file limit (413) and a full store (400 until a delete frees room).
#include <gtest/gtest.h>

#include "batch_test_client.h"
#include "server_harness.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;

const std::string kMultipartType =
    std::string("Content-Type: multipart/form-data; boundary=") + kTestBoundary;

TEST(FilesHttpTest, UploadGetContentListDelete) {
  ServerHarness h;
  const std::string content = "{\"a\":1}\n{\"b\":\"\\u00e9\\r\\n\"}\n";
  HttpResult up = upload(h.port(), content);
  ASSERT_EQ(up.status, 200) << up.body;
  const Json f = up.json();
  const std::string id = f["id"];
  EXPECT_TRUE(id.starts_with("file-"));
  EXPECT_EQ(f["object"], "file");
  EXPECT_EQ(f["bytes"], content.size());
  EXPECT_EQ(f["filename"], "input.jsonl");
  EXPECT_EQ(f["purpose"], "batch");
  EXPECT_EQ(f["status"], "processed");
  EXPECT_TRUE(f["created_at"].is_number());

  EXPECT_EQ(http_request(h.port(), "GET", "/v1/files/" + id).json(), f);
  HttpResult raw = http_request(h.port(), "GET", "/v1/files/" + id + "/content");
  ASSERT_EQ(raw.status, 200);
  EXPECT_EQ(raw.body, content);
  EXPECT_EQ(raw.header("content-type"), "application/octet-stream");

  const std::string id2 = upload(h.port(), "{}\n").json()["id"];
  Json list = http_request(h.port(), "GET", "/v1/files").json();
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 2u);
  EXPECT_EQ(list["data"][0]["id"], id2);  // newest first
  list = http_request(h.port(), "GET", "/v1/files?order=asc&limit=1").json();
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], id);
  EXPECT_EQ(list["has_more"], true);
  list = http_request(h.port(), "GET", "/v1/files?order=asc&after=" + id).json();
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], id2);
  EXPECT_TRUE(
      http_request(h.port(), "GET", "/v1/files?purpose=batch_output").json()["data"].empty());
  EXPECT_EQ(http_request(h.port(), "GET", "/v1/files?order=up").status, 400);

  HttpResult del = http_request(h.port(), "DELETE", "/v1/files/" + id);
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(del.json(), Json({{"id", id}, {"object", "file"}, {"deleted", true}}));
  HttpResult gone = http_request(h.port(), "GET", "/v1/files/" + id);
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(gone.json()["error"]["code"], "file_not_found");
  EXPECT_EQ(http_request(h.port(), "DELETE", "/v1/files/" + id).status, 404);
  EXPECT_EQ(http_request(h.port(), "GET", "/v1/files/" + id + "/content").status, 404);
  EXPECT_EQ(http_request(h.port(), "GET", "/v1/files/" + id2 + "/other").status, 404);
  EXPECT_EQ(http_request(h.port(), "PUT", "/v1/files").status, 405);
}

TEST(FilesHttpTest, BadUploads) {
  ServerHarness h;
  auto post = [&](const std::string& body, const std::string& type) {
    return http_request(h.port(), "POST", "/v1/files", body, {type});
  };
  // Not multipart, or no boundary.
  EXPECT_EQ(post("{}", "Content-Type: application/json").status, 400);
  EXPECT_EQ(post("x", "Content-Type: multipart/form-data").status, 400);
  // Broken bodies.
  for (const std::string& body :
       {std::string("no delimiter at all"),
        std::string("--") + kTestBoundary + "\r\nContent-Disposition: form-data; name=\"file\"\r\n",
        std::string("--") + kTestBoundary +
            "\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nunterminated",
        std::string("--") + kTestBoundary + "\r\nX: y\r\n\r\ndata\r\n--" + kTestBoundary + "--"}) {
    HttpResult r = post(body, kMultipartType);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_TRUE(r.json()["error"]["message"].get<std::string>().starts_with("Malformed multipart"))
        << r.body;
  }
  // Wrong or missing parts.
  HttpResult wrong = upload(h.port(), "{}\n", "assistants");
  EXPECT_EQ(wrong.status, 400);
  EXPECT_EQ(wrong.json()["error"]["param"], "purpose");
  HttpResult no_file = post(multipart_body({{"purpose", "", "batch"}}), kMultipartType);
  EXPECT_EQ(no_file.status, 400);
  EXPECT_EQ(no_file.json()["error"]["param"], "file");
  HttpResult no_purpose = post(multipart_body({{"file", "a.jsonl", "{}"}}), kMultipartType);
  EXPECT_EQ(no_purpose.status, 400);
  EXPECT_EQ(no_purpose.json()["error"]["param"], "purpose");
  // Quoted boundary, parts in the other order, a preamble: accepted.
  const std::string body =
      "preamble\r\n" + multipart_body({{"file", "b.jsonl", "{}"}, {"purpose", "", "batch"}});
  HttpResult ok = post(
      body, std::string("Content-Type: multipart/form-data; boundary=\"") + kTestBoundary + "\"");
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.json()["filename"], "b.jsonl");
  EXPECT_EQ(ok.json()["bytes"], 2);
}

TEST(FilesHttpTest, LimitsPerFileAndForTheStore) {
  ServerConfig cfg = test_config();
  cfg.max_body_bytes = 8 * 1024;
  cfg.max_inflight_body_bytes = 64 * 1024;
  cfg.max_file_store_bytes = 10 * 1024;
  ServerHarness h(cfg);
  HttpResult big = upload(h.port(), std::string(9 * 1024, 'x'));
  EXPECT_EQ(big.status, 413) << big.body;
  HttpResult a = upload(h.port(), std::string(6 * 1024, 'a'));
  ASSERT_EQ(a.status, 200) << a.body;
  HttpResult b = upload(h.port(), std::string(6 * 1024, 'b'));
  EXPECT_EQ(b.status, 400);
  EXPECT_EQ(b.json()["error"]["code"], "file_store_full");
  ASSERT_EQ(
      http_request(h.port(), "DELETE", "/v1/files/" + a.json()["id"].get<std::string>()).status,
      200);
  EXPECT_EQ(upload(h.port(), std::string(6 * 1024, 'b')).status, 200);
}

TEST(FilesHttpTest, NeedTheApiKey) {
  ServerConfig cfg = test_config();
  cfg.api_key = "secret";
  ServerHarness h(cfg);
  EXPECT_EQ(http_request(h.port(), "GET", "/v1/files").status, 401);
  EXPECT_EQ(http_request(h.port(), "GET", "/v1/batches").status, 401);
  EXPECT_EQ(http_request(h.port(), "GET", "/v1/files", "", {"Authorization: Bearer secret"}).status,
            200);
}

}  // namespace
}  // namespace keel::server::testing
