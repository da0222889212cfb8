// Parsing of streamed OpenAI payloads with nlohmann::json; its exceptions never leave this file.
#include "loadgen/stream_chunk.h"

#include <nlohmann/json.hpp>

namespace keel::loadgen {
namespace {

using nlohmann::json;

std::string excerpt(std::string_view s, size_t max_len) {
  std::string out(s.substr(0, max_len));
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (s.size() > max_len) out += "...";
  return out;
}

std::string string_or_dump(const json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::optional<int64_t> int_member(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

// Text of one choice: `text` (completions) or the delta's content / reasoning (chat).
std::string choice_text(const json& choice) {
  if (!choice.is_object()) return {};
  if (auto t = choice.find("text"); t != choice.end() && t->is_string())
    return t->get<std::string>();
  auto delta = choice.find("delta");
  if (delta == choice.end() || !delta->is_object()) return {};
  std::string out;
  for (const char* key : {"reasoning_content", "reasoning", "content"}) {
    if (auto t = delta->find(key); t != delta->end() && t->is_string())
      out += t->get<std::string>();
  }
  return out;
}

StreamChunk from_object(const json& obj) {
  StreamChunk c;
  if (auto err = obj.find("error"); err != obj.end() && !err->is_null()) {
    c.kind = ChunkKind::kError;
    if (err->is_object() && err->contains("message")) {
      c.error_message = string_or_dump((*err)["message"]);
    } else {
      c.error_message = string_or_dump(*err);
    }
    return c;
  }
  if (auto choices = obj.find("choices");
      choices != obj.end() && choices->is_array() && !choices->empty()) {
    c.kind = ChunkKind::kContent;
    c.text = choice_text(choices->front());
  }
  if (auto usage = obj.find("usage"); usage != obj.end() && usage->is_object()) {
    c.completion_tokens = int_member(*usage, "completion_tokens");
    c.prompt_tokens = int_member(*usage, "prompt_tokens");
  }
  return c;
}

}  // namespace

Result<StreamChunk> parse_stream_chunk(std::string_view data) {
  std::string_view trimmed = data;
  while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\n')) {
    trimmed.remove_suffix(1);
  }
  if (trimmed == "[DONE]") return StreamChunk{.kind = ChunkKind::kDone};
  json obj = json::parse(trimmed, nullptr, /*allow_exceptions=*/false);
  if (obj.is_discarded() || !obj.is_object()) {
    return Status::corrupt("malformed SSE data (not a JSON object): '" + excerpt(data, 120) + "'");
  }
  try {
    return from_object(obj);
  } catch (const json::exception& e) {
    return Status::corrupt(std::string("unexpected SSE chunk layout: ") + e.what());
  }
}

std::string error_message_from_body(std::string_view body, size_t max_len) {
  json obj = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!obj.is_discarded() && obj.is_object()) {
    try {
      if (auto err = obj.find("error"); err != obj.end()) {
        if (err->is_object() && err->contains("message")) {
          return excerpt(string_or_dump((*err)["message"]), max_len);
        }
        return excerpt(string_or_dump(*err), max_len);
      }
      for (const char* key : {"message", "detail"}) {
        if (auto m = obj.find(key); m != obj.end()) return excerpt(string_or_dump(*m), max_len);
      }
    } catch (const json::exception&) {
      // fall through to the raw body
    }
  }
  return excerpt(body, max_len);
}

}  // namespace keel::loadgen
