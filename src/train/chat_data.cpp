// parse_chat_jsonl (chat_data.h): JSON → template messages → rendered prefixes → tokens and mask.
#include "train/chat_data.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace keel::train {
namespace {

using Json = nlohmann::ordered_json;

struct Conversation {
  std::vector<tokenizer::ChatMessage> messages;
  std::vector<bool> trained;  // per message: an assistant message of weight 1
  Json tools;
};

Status line_error(int64_t line, const std::string& what) {
  return Status::invalid_argument("line " + std::to_string(line) + ": " + what);
}

// A message's content: a string, null, or an array of {"type": "text", "text": ...} parts.
Result<std::string> content_text(const Json& content, const std::string& where) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return Status::invalid_argument(where + ".content must be a string, an array or null");
  }
  std::string text;
  for (const Json& part : content) {
    if (!part.is_object() || !part.contains("text") || !part["text"].is_string()) {
      return Status::invalid_argument(where + ".content has a part that is not a text part");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// tool_calls with each function's `arguments` string parsed to JSON (kept when it does not parse).
Json parsed_tool_calls(Json calls) {
  if (!calls.is_array()) return calls;
  for (Json& call : calls) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
    Json& f = call["function"];
    if (f.contains("arguments") && f["arguments"].is_string()) {
      Json parsed = Json::parse(f["arguments"].get<std::string>(), nullptr, false);
      if (!parsed.is_discarded()) f["arguments"] = std::move(parsed);
    }
  }
  return calls;
}

Result<Conversation> read_conversation(const Json& j) {
  if (!j.is_object()) return Status::invalid_argument("not a JSON object");
  if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty()) {
    return Status::invalid_argument("'messages' must be a non-empty array");
  }
  Conversation c;
  if (j.contains("tools") && !j["tools"].is_null()) {
    if (!j["tools"].is_array()) return Status::invalid_argument("'tools' must be an array");
    c.tools = j["tools"];
  }
  const Json& msgs = j["messages"];
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Json& m = msgs[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return Status::invalid_argument(where + " needs a string 'role'");
    }
    tokenizer::ChatMessage cm;
    cm.role = m["role"].get<std::string>();
    KEEL_ASSIGN_OR_RETURN(cm.content, content_text(m.value("content", Json()), where));
    for (const char* key : {"name", "tool_call_id"}) {
      if (m.contains(key) && m[key].is_string()) cm.extra[key] = m[key];
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      cm.extra["tool_calls"] = parsed_tool_calls(m["tool_calls"]);
      if (m.value("content", Json()).is_null()) cm.extra["content"] = nullptr;
    }
    bool trained = cm.role == "assistant";
    if (m.contains("weight")) {
      const Json& w = m["weight"];
      if (!w.is_number_integer() || (w.get<int64_t>() != 0 && w.get<int64_t>() != 1)) {
        return Status::invalid_argument(where + ".weight must be 0 or 1");
      }
      if (cm.role != "assistant") {
        return Status::invalid_argument(where + ".weight is allowed on assistant messages only");
      }
      trained = w.get<int64_t>() == 1;
    }
    c.messages.push_back(std::move(cm));
    c.trained.push_back(trained);
  }
  if (std::find(c.trained.begin(), c.trained.end(), true) == c.trained.end()) {
    return Status::invalid_argument("no assistant message to train on (weight 1)");
  }
  return c;
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

class Renderer {
 public:
  Renderer(const tokenizer::ChatTemplate& tmpl, const tokenizer::Tokenizer& tok)
      : tmpl_(tmpl), tok_(tok) {}

  // The text of messages [0, n) (with the generation prompt when `gen`).
  Result<tokenizer::TrackedText> render(const Conversation& c, size_t n, bool gen) const {
    tokenizer::ChatRenderOptions o;
    o.add_generation_prompt = gen;
    o.bos_token = tokenizer::bos_text(tok_);
    o.eos_token = tokenizer::eos_text(tok_);
    o.tools = c.tools;
    return tmpl_.render_tracked(std::span(c.messages.data(), n), o);
  }
  std::vector<int32_t> encode(const tokenizer::TrackedText& text) const {
    return tok_.encode(tokenizer::prompt_for_tokenizer(text, tok_), true, true);
  }

 private:
  const tokenizer::ChatTemplate& tmpl_;
  const tokenizer::Tokenizer& tok_;
};

Result<ChatExample> render_example(const Conversation& c, const Renderer& r, int64_t line) {
  KEEL_ASSIGN_OR_RETURN(const tokenizer::TrackedText full, r.render(c, c.messages.size(), false));
  ChatExample ex;
  ex.line = line;
  ex.seq.tokens = r.encode(full);
  ex.seq.target.assign(ex.seq.tokens.size(), 0);
  const size_t n_tokens = ex.seq.tokens.size();
  for (size_t i = 0; i < c.messages.size(); ++i) {
    if (!c.trained[i]) continue;
    KEEL_ASSIGN_OR_RETURN(const tokenizer::TrackedText before, r.render(c, i, true));
    KEEL_ASSIGN_OR_RETURN(const tokenizer::TrackedText upto, r.render(c, i + 1, false));
    if (!full.text.starts_with(before.text) || !full.text.starts_with(upto.text)) {
      return Status::invalid_argument(
          "messages[" + std::to_string(i) +
          "]: the chat template does not render this conversation's start as a prefix of the "
          "whole, so the assistant turn cannot be located");
    }
    const std::vector<int32_t> a = r.encode(tokenizer::tracked_substr(full, 0, before.text.size()));
    const std::vector<int32_t> b = r.encode(tokenizer::tracked_substr(full, 0, upto.text.size()));
    const size_t begin = std::max<size_t>(1, common_prefix(a, ex.seq.tokens));
    const size_t lcp_end = common_prefix(b, ex.seq.tokens);
    const size_t end = lcp_end == b.size() ? lcp_end : std::min(n_tokens, lcp_end + 1);
    if (end <= begin) continue;  // an empty turn
    for (size_t t = begin; t < end; ++t) ex.seq.target[t] = 1;
    ex.turns.push_back({static_cast<int64_t>(begin), static_cast<int64_t>(end)});
  }
  if (ex.turns.empty()) return Status::invalid_argument("the trained assistant turns are empty");
  return ex;
}

}  // namespace

Result<ChatDataset> parse_chat_jsonl(std::string_view jsonl, const tokenizer::ChatTemplate& tmpl,
                                     const tokenizer::Tokenizer& tok,
                                     const ChatDataOptions& options) {
  ChatDataset data;
  const Renderer renderer(tmpl, tok);
  int64_t line = 0;
  size_t pos = 0;
  while (pos < jsonl.size()) {
    const size_t nl = std::min(jsonl.find('\n', pos), jsonl.size());
    const std::string_view text = jsonl.substr(pos, nl - pos);
    pos = nl + 1;
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const Json j = Json::parse(text, nullptr, false);
    if (j.is_discarded()) return line_error(line, "not valid JSON");
    Result<Conversation> c = read_conversation(j);
    if (!c.ok()) return line_error(line, c.status().message());
    Result<ChatExample> ex = render_example(*c, renderer, line);
    if (!ex.ok()) return line_error(line, ex.status().message());
    if (options.max_tokens > 0 &&
        static_cast<int64_t>(ex->seq.tokens.size()) > options.max_tokens) {
      ex->seq.tokens.resize(static_cast<size_t>(options.max_tokens));
      ex->seq.target.resize(static_cast<size_t>(options.max_tokens));
      std::erase_if(ex->turns, [&](const TurnSpan& t) { return t.begin >= options.max_tokens; });
      for (TurnSpan& t : ex->turns) t.end = std::min(t.end, options.max_tokens);
      ex->truncated = true;
      ++data.num_truncated;
    }
    data.num_tokens += static_cast<int64_t>(ex->seq.tokens.size());
    data.num_targets += ex->seq.num_targets();
    data.examples.push_back(std::move(*ex));
  }
  if (data.examples.empty()) return Status::invalid_argument("the file has no conversation");
  return data;
}

Result<std::string> read_text_file(FileSystem& fs, const std::string& path) {
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, fs.open_readable(path));
  std::string text(f->size(), '\0');
  KEEL_TRY(f->read_at(0, text.size(), text.data()));
  return text;
}

}  // namespace keel::train
