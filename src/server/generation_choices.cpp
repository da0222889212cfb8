// GenerationChoices (see generation_choices.h).
#include "server/generation_choices.h"

#include "server/lora_routes.h"
#include "server/tool_grammar.h"

#include <fmt/format.h>

#include <ctime>

namespace keel::server {

GenerationChoices::GenerationChoices(const ServerContext& ctx, GenerationSpec spec,
                                     std::vector<PreparedPrompt> prompts, std::string request_id)
    : engine_(ctx.deps.engine),
      spec_(std::move(spec)),
      prompts_(std::move(prompts)),
      request_id_(std::move(request_id)),
      tool_family_(ctx.deps.tool_format.family),
      reasoning_parser_(ctx.deps.reasoning_parser) {
  reasoning_ = spec_.kind == ApiKind::kChat && reasoning_parser_ != ReasoningParser::kNone &&
               (spec_.grammar.empty() || spec_.tools.constrained);
  meta_.kind = spec_.kind;
  meta_.id = (spec_.kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-") + request_id_;
  meta_.created = static_cast<int64_t>(std::time(nullptr));
  meta_.model = spec_.model.empty() ? ctx.config.served_model_name : spec_.model;
  lora_ = lora_for_model(ctx, spec_.model);
  const tokenizer::Tokenizer& tok = *ctx.deps.tokenizer;
  slots_.resize(prompts_.size() * static_cast<size_t>(spec_.n));
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    s.prompt = i / static_cast<size_t>(spec_.n);
    s.index = static_cast<int32_t>(i);
    const std::string& echo = prompts_[s.prompt].text;
    s.out = std::make_unique<ChoiceOutput>(
        tok, ChoiceOutputOptions{.stops = spec_.stop,
                                 .logprobs = spec_.logprobs,
                                 .accumulate = !spec_.stream,
                                 .text_offset_base = spec_.echo ? count_code_points(echo) : 0});
    if (spec_.stream && spec_.tools.active()) {
      s.tools = std::make_unique<ToolCallStream>(tool_family_, &spec_.tools);
    }
    if (spec_.stream && reasoning_) {
      s.reasoning = std::make_unique<ReasoningSplitter>(starts_in_reasoning(s));
    }
  }
}

bool GenerationChoices::starts_in_reasoning(const Slot& slot) const {
  return server::starts_in_reasoning(reasoning_parser_, prompts_[slot.prompt].think_tail);
}

engine::GenerationRequest GenerationChoices::make_request(const Slot& slot) const {
  const PreparedPrompt& p = prompts_[slot.prompt];
  engine::GenerationRequest r;
  r.request_id = fmt::format("{}-{}", request_id_, slot.index);
  r.prompt_tokens = p.tokens;
  r.sampling = spec_.sampling;
  if (r.sampling.seed) *r.sampling.seed += static_cast<uint64_t>(slot.index % spec_.n);
  r.max_tokens = p.max_tokens;
  r.ignore_eos = spec_.ignore_eos;
  r.stop_token_ids = spec_.stop_token_ids;
  r.stop_strings = spec_.stop;
  r.cache_salt = spec_.cache_salt;
  r.tenant = spec_.tenant;
  r.tenant_weight = spec_.tenant_weight;
  r.program = spec_.program;
  r.priority = spec_.priority;
  r.work_class = spec_.work_class;
  r.lora = lora_;
  r.grammar = spec_.grammar;
  if (reasoning_ && spec_.tools.constrained) {  // the thinking first, then the calls' grammar
    r.grammar = with_reasoning_prefix(spec_.grammar, starts_in_reasoning(slot));
  }
  r.pic_chunks = p.pic_chunks;
  r.pic_link = spec_.pic_link;
  if (spec_.sparse_policy)
    r.sparse = engine::SparseParams{*spec_.sparse_policy, spec_.sparse_budget};
  r.speculative = spec_.speculative;
  r.early_exit = spec_.early_exit;
  r.keep_kv = keeps_kv();
  return r;
}

bool GenerationChoices::keeps_kv() const {
  return spec_.kind == ApiKind::kChat && spec_.tools.active() &&
         spec_.work_class == engine::WorkClass::kInteractive;
}

bool GenerationChoices::ended_in_tool_call(const Slot& slot) const {
  if (slot.tools) return slot.tools->num_calls() > 0;  // streamed: its finish was pushed
  std::string text = slot.out->text();
  if (reasoning_) text = split_reasoning(text, starts_in_reasoning(slot)).content;
  return !parse_tool_output(tool_family_, text, spec_.tools).calls.empty();
}

std::optional<ApiError> GenerationChoices::submit_all(const SinkFactory& make_sink) {
  for (Slot& s : slots_) {
    Result<engine::RequestKey> key = engine_->submit(make_request(s), make_sink(s.index));
    if (!key.ok()) return ApiError::from_status(key.error());
    s.key = *key;
    s.submitted = true;
  }
  return std::nullopt;
}

void GenerationChoices::placed(size_t choice, engine::RequestKey key) {
  Slot& s = slots_[choice];
  s.key = key;
  s.submitted = true;
}

void GenerationChoices::abort_unfinished() {
  for (Slot& s : slots_) {
    if (s.submitted && !s.done) {
      engine_->abort(s.key);
      s.done = true;
    }
  }
}

void GenerationChoices::stream_delta(Slot& slot, ChoiceDelta& d, std::string* out) const {
  const bool chat = spec_.kind == ApiKind::kChat;
  if (!slot.sent_first && (d.first_tokens || d.finish)) {
    slot.sent_first = true;
    if (chat) {
      emit({.index = slot.index, .role = true, .text = std::string()}, out);
    } else if (spec_.echo) {
      d.text.insert(0, prompts_[slot.prompt].text);
    }
  }
  std::string reasoning;
  if (slot.reasoning) {
    ReasoningParts parts = slot.reasoning->push(d.text);
    if (d.finish) {
      ReasoningParts rest = slot.reasoning->finish();
      parts.reasoning += rest.reasoning;
      parts.content += rest.content;
    }
    reasoning = std::move(parts.reasoning);
    d.text = std::move(parts.content);
  }
  ToolStreamOutput calls;
  if (slot.tools) {
    calls = slot.tools->push(d.text);
    d.text = std::move(calls.content);
    calls.content.clear();
  }
  if (!d.text.empty() || !d.logprobs.empty() || !reasoning.empty()) {
    ChunkChoice c{.index = slot.index, .has_logprobs = spec_.logprobs, .logprobs = d.logprobs};
    if (!reasoning.empty()) c.reasoning = std::move(reasoning);
    if (!d.text.empty() || !c.reasoning) c.text = std::move(d.text);
    emit(c, out);
  }
  if (slot.tools) stream_tool_output(slot, std::move(calls), out);
  if (d.finish) {
    ChunkChoice c{.index = slot.index, .finish_reason = d.finish};
    if (slot.tools) {
      stream_tool_output(slot, slot.tools->finish(), out);
      if (slot.tools->num_calls() > 0) c.finish_reason = "tool_calls";
    }
    c.stop_reason = slot.out->stop_reason();
    if (!chat) c.text = std::string();
    emit(c, out);
  }
}

void GenerationChoices::emit(const ChunkChoice& c, std::string* out) const {
  if (observer_) {
    observer_(c);
  } else {
    *out += chunk_event(meta_, c, spec_.include_usage);
  }
}

void GenerationChoices::name_calls(int32_t choice, std::vector<ToolCall>* calls) const {
  for (size_t i = 0; i < calls->size(); ++i) {
    (*calls)[i].id = make_tool_call_id(tool_family_, request_id_, choice, i);
  }
}

void GenerationChoices::stream_tool_output(const Slot& slot, ToolStreamOutput o,
                                           std::string* out) const {
  if (!o.content.empty()) {
    emit({.index = slot.index, .text = std::move(o.content)}, out);
  }
  for (ToolCallDelta& d : o.deltas) {
    ChunkChoice c{.index = slot.index};
    if (d.start) {
      const ToolCall call{.id = make_tool_call_id(tool_family_, request_id_, slot.index, d.index),
                          .name = std::move(d.name)};
      c.tool_calls = tool_call_start_delta(d.index, call);
    } else {
      c.tool_calls = tool_call_arguments_delta(d.index, d.arguments);
    }
    emit(c, out);
  }
}

void GenerationChoices::consume(size_t choice, engine::TokenEvent event, std::string* sse) {
  Slot& slot = slots_[choice];
  if (slot.done) return;  // nothing follows a final event; defensive
  ChoiceDelta d = slot.out->consume(std::move(event));
  if (slot.out->finished()) {
    slot.done = true;
    ++num_done_;
  }
  if (d.error) {
    if (!failure_) {
      failure_ = d.engine_abort ? ApiError::unavailable(*d.error) : ApiError::internal(*d.error);
    }
    return;
  }
  if (spec_.stream && sse != nullptr) stream_delta(slot, d, sse);
  // KV kept across tool calls: the engine pinned a keep_kv request that stopped; a turn that did
  // not end in a tool call has no next turn to keep it for.
  if (slot.done && keeps_kv() && slot.out->finish_reason() == "stop" && !ended_in_tool_call(slot)) {
    engine_->release_kv_pin(slot.key);
  }
}

Usage GenerationChoices::usage() const {
  Usage u;
  for (const PreparedPrompt& p : prompts_) u.prompt_tokens += static_cast<int64_t>(p.tokens.size());
  for (const Slot& s : slots_) {
    u.completion_tokens += s.out->num_generated();
    if (s.index % spec_.n == 0) u.cached_tokens += s.out->num_cached_tokens();
  }
  return u;
}

std::string GenerationChoices::final_body() const {
  std::vector<FinishedChoice> choices;
  choices.reserve(slots_.size());
  for (const Slot& s : slots_) {
    FinishedChoice c;
    c.index = s.index;
    c.text = spec_.echo ? prompts_[s.prompt].text + s.out->text() : s.out->text();
    c.finish_reason = s.out->finish_reason().value_or("stop");
    if (reasoning_) {
      ReasoningParts parts = split_reasoning(c.text, starts_in_reasoning(s));
      c.text = std::move(parts.content);
      if (!parts.reasoning.empty()) c.reasoning = std::move(parts.reasoning);
    }
    if (spec_.kind == ApiKind::kChat && spec_.tools.active()) {
      ParsedToolOutput parsed = parse_tool_output(tool_family_, c.text, spec_.tools);
      std::string content = std::move(parsed.content);
      if (!parsed.calls.empty()) {
        name_calls(s.index, &parsed.calls);
        c.tool_calls = tool_calls_json(parsed.calls);
        c.finish_reason = "tool_calls";
        c.content_null = content.empty();
      }
      c.text = std::move(content);
    }
    c.stop_reason = s.out->stop_reason();
    c.has_logprobs = spec_.logprobs;
    c.logprobs = s.out->logprobs();
    choices.push_back(std::move(c));
  }
  return completion_body(meta_, choices, usage());
}

std::string GenerationChoices::stream_tail() const {
  std::string tail;
  if (spec_.include_usage) tail += usage_event(meta_, usage());
  tail += kDoneEvent;
  return tail;
}

}  // namespace keel::server
