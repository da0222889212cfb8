// /v1/files and /v1/batches (see batch_routes.h).
#include "server/batch_routes.h"

#include <fmt/format.h>

#include <ctime>
#include <optional>
#include <string>

#include "core/log.h"
#include "server/api_list.h"
#include "server/batch_input.h"
#include "server/batch_runner.h"
#include "server/http_framing.h"
#include "server/json_fields.h"
#include "server/multipart.h"
#include "server/response_builder.h"
#include "server/router.h"

namespace keel::server {
namespace {

constexpr std::string_view kFilesPath = "/v1/files";
constexpr std::string_view kBatchesPath = "/v1/batches";
constexpr int64_t kCompletionWindowSeconds = 24 * 3600;

// The decoded value of query parameter `key`, or nullopt.
std::optional<std::string> query_param(const HttpRequest& req, std::string_view key) {
  return server::query_param(req.target, key);
}

ApiError not_found(std::string_view what, std::string_view id, std::string_view code) {
  return object_not_found(what, id, code);
}

HttpResponse json_response(const Json& j) { return HttpResponse::json(200, dump_json(j)); }

// --- files ---

HttpResponse upload_file(ServerContext& ctx, const HttpRequest& req) {
  ApiResult<std::string> boundary = multipart_boundary(req.header("content-type"));
  if (!boundary.ok()) return HttpResponse::error(boundary.error());
  ApiResult<std::vector<MultipartPart>> parts = parse_multipart(req.body, boundary.value());
  if (!parts.ok()) return HttpResponse::error(parts.error());
  const MultipartPart* purpose = nullptr;
  const MultipartPart* file = nullptr;
  for (const MultipartPart& p : parts.value()) {
    if (p.name == "purpose" && purpose == nullptr) purpose = &p;
    if (p.name == "file" && file == nullptr) file = &p;
  }
  if (purpose == nullptr) {
    return HttpResponse::error(
        ApiError::bad_request("Missing required parameter: 'purpose'.", "purpose"));
  }
  if (purpose->data != "batch" && purpose->data != "fine-tune") {
    return HttpResponse::error(ApiError::bad_request(
        fmt::format("'{}' is not a supported purpose: this server stores files for the Batch API "
                    "(purpose 'batch') and fine-tuning (purpose 'fine-tune').",
                    purpose->data.substr(0, 64)),
        "purpose"));
  }
  if (file == nullptr) {
    return HttpResponse::error(
        ApiError::bad_request("Missing required parameter: 'file'.", "file"));
  }
  std::string filename = file->filename.value_or("");
  if (filename.empty()) filename = "upload.jsonl";
  ApiResult<StoredFile> stored = ctx.files.add("file-" + ctx.ids.next(), std::string(purpose->data),
                                               std::move(filename), std::string(file->data), true);
  if (!stored.ok()) return HttpResponse::error(stored.error());
  return json_response(stored.value().to_json());
}

HttpResponse list_files(ServerContext& ctx, const HttpRequest& req) {
  ApiResult<size_t> limit = query_limit(req, 10'000, 10'000);
  if (!limit.ok()) return HttpResponse::error(limit.error());
  const std::string order = query_param(req, "order").value_or("desc");
  if (order != "asc" && order != "desc") {
    return HttpResponse::error(ApiError::bad_request(
        fmt::format("`order` must be \"asc\" or \"desc\", got \"{}\"", order.substr(0, 32)),
        "order"));
  }
  const FileStore::Page page =
      ctx.files.list(query_param(req, "purpose").value_or(""), limit.value(),
                     query_param(req, "after").value_or(""), order == "asc");
  Json data = Json::array();
  for (const StoredFile& f : page.files) data.push_back(f.to_json());
  return json_response(list_object(std::move(data), page.has_more));
}

HttpResponse route_files(ServerContext& ctx, const HttpRequest& req) {
  if (req.path == kFilesPath) {
    return req.method == "POST" ? upload_file(ctx, req) : list_files(ctx, req);
  }
  const SubPath sp = *sub_path(req.path, kFilesPath);
  if (req.method == "DELETE") {
    if (!ctx.files.remove(sp.id))
      return HttpResponse::error(not_found("File", sp.id, "file_not_found"));
    return json_response({{"id", sp.id}, {"object", "file"}, {"deleted", true}});
  }
  std::optional<StoredFile> f = ctx.files.find(sp.id);
  if (!f) return HttpResponse::error(not_found("File", sp.id, "file_not_found"));
  if (sp.action.empty()) return json_response(f->to_json());
  HttpResponse r = HttpResponse::json(200, *f->content);
  r.content_type = "application/octet-stream";
  return r;
}

// --- batches ---

std::optional<ApiError> check_metadata(const Json& body) {
  const Json* metadata = field(body, "metadata");
  if (metadata == nullptr) return std::nullopt;
  if (!metadata->is_object()) return type_error("metadata", "an object", *metadata);
  if (metadata->size() > 16) {
    return ApiError::bad_request("`metadata` may hold at most 16 keys", "metadata");
  }
  for (const auto& [key, value] : metadata->items()) {
    if (key.size() > 64 || !value.is_string() || value.get_ref<const std::string&>().size() > 512) {
      return ApiError::bad_request(
          "`metadata` keys must be at most 64 characters and values strings of at most 512",
          "metadata");
    }
  }
  return std::nullopt;
}

// A required string field.
std::optional<ApiError> read_required(const Json& body, std::string_view name, std::string* out) {
  std::optional<std::string> v;
  if (MaybeError e = read_string(body, name, &v)) return e;
  if (!v) {
    return ApiError::bad_request(fmt::format("Missing required parameter: '{}'.", name),
                                 std::string(name));
  }
  *out = std::move(*v);
  return std::nullopt;
}

ApiResult<BatchRecord> parse_batch_create(ServerContext& ctx, const Json& body) {
  if (!body.is_object()) return type_error("body", "a JSON object", body);
  BatchRecord r;
  KEEL_API_TRY(read_required(body, "input_file_id", &r.input_file_id));
  KEEL_API_TRY(read_required(body, "endpoint", &r.endpoint));
  KEEL_API_TRY(read_required(body, "completion_window", &r.completion_window));
  KEEL_API_TRY(check_metadata(body));
  if (!is_batch_endpoint(r.endpoint)) {
    return ApiError::bad_request(
        fmt::format("Batches run on /v1/chat/completions or /v1/completions, not \"{}\".",
                    r.endpoint.substr(0, 100)),
        "endpoint");
  }
  if (r.completion_window != "24h") {
    return ApiError::bad_request(fmt::format("`completion_window` must be \"24h\", got \"{}\".",
                                             r.completion_window.substr(0, 32)),
                                 "completion_window");
  }
  std::optional<StoredFile> file = ctx.files.find(r.input_file_id);
  if (!file) {
    ApiError e = not_found("File", r.input_file_id, "file_not_found");
    e.param = "input_file_id";
    return e;
  }
  if (file->purpose != "batch") {
    return ApiError::bad_request(
        fmt::format("File {} has purpose '{}'; a batch's input file must have purpose 'batch'.",
                    file->id, file->purpose),
        "input_file_id");
  }
  if (ctx.draining.load(std::memory_order_acquire)) {
    return ApiError::unavailable("The server is shutting down.");
  }
  if (const Json* metadata = field(body, "metadata")) r.metadata = *metadata;
  r.id = "batch_" + ctx.ids.next();
  r.created_at = static_cast<int64_t>(std::time(nullptr));
  r.expires_at = r.created_at + kCompletionWindowSeconds;
  return r;
}

HttpResponse create_batch(ServerContext& ctx, const HttpRequest& req) {
  ApiResult<Json> body = parse_json_text(req.body);
  if (!body.ok()) return HttpResponse::error(body.error());
  ApiResult<BatchRecord> record = parse_batch_create(ctx, body.value());
  if (!record.ok()) return HttpResponse::error(record.error());
  const BatchRecord& r = record.value();
  // The input is pinned for the runner: deleting the file later does not affect the batch.
  std::shared_ptr<const std::string> input = ctx.files.pin(r.input_file_id);
  if (!input) return HttpResponse::error(not_found("File", r.input_file_id, "file_not_found"));
  if (Status added = ctx.batches.add(r); !added.ok()) {
    ctx.files.unpin(r.input_file_id);
    KEEL_LOG_WARN("batch {} not created: {}", r.id, added.message());
    ApiError e = ApiError::internal(
        "The batch could not be written to the server's state directory; see the server's log.");
    e.code = "batch_store_write_failed";
    return HttpResponse::error(e);
  }
  ctx.batch_runner->submit(r, std::move(input));
  return json_response(r.to_json());
}

HttpResponse list_batches(ServerContext& ctx, const HttpRequest& req) {
  ApiResult<size_t> limit = query_limit(req, 20, 100);
  if (!limit.ok()) return HttpResponse::error(limit.error());
  const BatchStore::Page page =
      ctx.batches.list(limit.value(), query_param(req, "after").value_or(""));
  Json data = Json::array();
  for (const BatchRecord& b : page.batches) data.push_back(b.to_json());
  return json_response(list_object(std::move(data), page.has_more));
}

HttpResponse route_batches(ServerContext& ctx, const HttpRequest& req) {
  if (req.path == kBatchesPath) {
    return req.method == "POST" ? create_batch(ctx, req) : list_batches(ctx, req);
  }
  const SubPath sp = *sub_path(req.path, kBatchesPath);
  if (sp.action == "cancel") {
    ApiResult<BatchRecord> r = ctx.batch_runner->cancel(sp.id);
    if (!r.ok()) return HttpResponse::error(r.error());
    return json_response(r.value().to_json());
  }
  std::optional<BatchRecord> r = ctx.batches.find(sp.id);
  if (!r) return HttpResponse::error(not_found("Batch", sp.id, "batch_not_found"));
  return json_response(r->to_json());
}

}  // namespace

std::string_view batch_route_methods(std::string_view path) {
  if (path == kFilesPath || path == kBatchesPath) return "GET, POST";
  if (std::optional<SubPath> sp = sub_path(path, kFilesPath)) {
    if (sp->action.empty()) return "GET, DELETE";
    return sp->action == "content" ? "GET" : "";
  }
  if (std::optional<SubPath> sp = sub_path(path, kBatchesPath)) {
    if (sp->action.empty()) return "GET";
    return sp->action == "cancel" ? "POST" : "";
  }
  return {};
}

HttpResponse route_batch_api(ServerContext& ctx, const HttpRequest& req) {
  if (ctx.batch_runner == nullptr && req.path.starts_with(kBatchesPath)) {
    // A context without a Server around it (fuzzers, tools) runs no batches.
    return HttpResponse::error(ApiError::unavailable("This server runs no batches."));
  }
  return req.path.starts_with(kFilesPath) ? route_files(ctx, req) : route_batches(ctx, req);
}

}  // namespace keel::server
