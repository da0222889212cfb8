// Batch API test helpers (see batch_test_client.h).
#include "batch_test_client.h"

#include <thread>

namespace keel::server::testing {

using Json = nlohmann::json;

std::string multipart_body(const std::vector<FormPart>& parts) {
  std::string body;
  for (const FormPart& p : parts) {
    body += std::string("--") + kTestBoundary + "\r\n";
    body += "Content-Disposition: form-data; name=\"" + p.name + "\"";
    if (!p.filename.empty()) body += "; filename=\"" + p.filename + "\"";
    body += "\r\n";
    if (!p.filename.empty()) body += "Content-Type: application/jsonl\r\n";
    body += "\r\n" + p.content + "\r\n";
  }
  body += std::string("--") + kTestBoundary + "--\r\n";
  return body;
}

HttpResult upload(uint16_t port, const std::string& content, const std::string& purpose) {
  return http_request(
      port, "POST", "/v1/files",
      multipart_body({{"purpose", "", purpose}, {"file", "input.jsonl", content}}),
      {std::string("Content-Type: multipart/form-data; boundary=") + kTestBoundary});
}

std::string jsonl(const std::vector<Json>& lines) {
  std::string out;
  for (const Json& l : lines) out += l.dump() + "\n";
  return out;
}

Json batch_line(const std::string& custom_id, const std::string& url, const Json& body) {
  return {{"custom_id", custom_id}, {"method", "POST"}, {"url", url}, {"body", body}};
}

HttpResult create_batch(uint16_t port, const std::vector<Json>& lines,
                        const std::string& endpoint) {
  HttpResult file = upload(port, jsonl(lines));
  if (file.status != 200) return file;
  return post_json(
      port, "/v1/batches",
      {{"input_file_id", file.json()["id"]}, {"endpoint", endpoint}, {"completion_window", "24h"}});
}

Json wait_batch_done(uint16_t port, const std::string& id, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Json batch;
  for (;;) {
    HttpResult r = http_request(port, "GET", "/v1/batches/" + id);
    if (r.status != 200) return Json{{"http_status", r.status}, {"body", r.body}};
    batch = r.json();
    const std::string status = batch["status"];
    if (status == "completed" || status == "failed" || status == "cancelled" ||
        status == "expired" || std::chrono::steady_clock::now() > deadline) {
      return batch;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::vector<Json> file_lines(uint16_t port, const std::string& file_id) {
  HttpResult r = http_request(port, "GET", "/v1/files/" + file_id + "/content");
  std::vector<Json> lines;
  if (r.status != 200) return lines;
  size_t pos = 0;
  while (pos < r.body.size()) {
    size_t eol = r.body.find('\n', pos);
    if (eol == std::string::npos) eol = r.body.size();
    if (eol > pos) lines.push_back(Json::parse(r.body.substr(pos, eol - pos)));
    pos = eol + 1;
  }
  return lines;
}

}  // namespace keel::server::testing
