// Helpers of the Batch API tests: multipart bodies, uploading a JSONL file, creating a batch,
// polling it until a terminal status (bounded), and reading a file's JSONL lines.
//
// Thread safety: plain functions (each request on a fresh connection).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_http_client.h"

namespace keel::server::testing {

struct FormPart {
  std::string name;
  std::string filename;  // "" = a plain field
  std::string content;
};
inline constexpr const char* kTestBoundary = "----keelTestBoundary7MA4YWxkTrZu0gW";

// A multipart/form-data body with kTestBoundary.
std::string multipart_body(const std::vector<FormPart>& parts);
// POST /v1/files with `purpose` and a file part holding `content`.
HttpResult upload(uint16_t port, const std::string& content, const std::string& purpose = "batch");
// The JSONL of `lines`, one per line.
std::string jsonl(const std::vector<nlohmann::json>& lines);
// A batch line {"custom_id", "method": "POST", "url", "body"}.
nlohmann::json batch_line(const std::string& custom_id, const std::string& url,
                          const nlohmann::json& body);
// Uploads `lines` and creates a batch on `endpoint`; the batch object (status 200 asserted by
// the caller through the returned HttpResult).
HttpResult create_batch(uint16_t port, const std::vector<nlohmann::json>& lines,
                        const std::string& endpoint);
// GET /v1/batches/{id} until its status is one of failed/completed/cancelled/expired or
// `timeout` passes; the last batch object.
nlohmann::json wait_batch_done(uint16_t port, const std::string& id,
                               std::chrono::milliseconds timeout = std::chrono::seconds(10));
// GET /v1/files/{id}/content, parsed line by line.
std::vector<nlohmann::json> file_lines(uint16_t port, const std::string& file_id);

}  // namespace keel::server::testing
