// Request parsing: accepted shapes (array content parts, developer role, every prompt form, vLLM
// extras, null fields, unknown fields) and, for each bad type or range, a 400
// invalid_request_error naming the parameter.
#include <gtest/gtest.h>

#include "server/generation_request.h"
#include "server/router.h"

namespace keel::server {
namespace {

using Json = nlohmann::json;

const ParseLimits kLimits{.vocab_size = 1000,
                          .max_n = 8,
                          .max_choices = 16,
                          .max_stop_strings = 4,
                          .max_stop_string_bytes = 32};

Json chat_body() {
  return Json{{"model", "m"},
              {"messages", Json::array({Json{{"role", "user"}, {"content", "Hi"}}})}};
}
Json completion_body() { return Json{{"model", "m"}, {"prompt", "Once"}}; }

TEST(ChatRequestTest, MinimalRequestGetsDefaults) {
  ApiResult<GenerationSpec> r = parse_chat_request(chat_body(), kLimits);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GenerationSpec& s = r.value();
  EXPECT_EQ(s.kind, ApiKind::kChat);
  EXPECT_EQ(s.model, "m");
  ASSERT_EQ(s.messages.size(), 1u);
  EXPECT_EQ(s.messages[0].role, "user");
  EXPECT_EQ(s.messages[0].content, "Hi");
  EXPECT_EQ(s.n, 1);
  EXPECT_FALSE(s.max_tokens.has_value());  // the rest of the context, decided later
  EXPECT_FALSE(s.stream);
  EXPECT_FALSE(s.logprobs);
  EXPECT_FALSE(s.sampling.logprobs.has_value());
  EXPECT_TRUE(s.add_generation_prompt);
}

TEST(ChatRequestTest, AcceptsPartsRolesExtrasAndNulls) {
  Json body = chat_body();
  body["messages"] =
      Json::array({{{"role", "developer"}, {"content", "Be brief."}},
                   {{"role", "user"},
                    {"content", Json::array({Json{{"type", "text"}, {"text", "a"}},
                                             Json{{"type", "text"}, {"text", "b"}}})}},
                   {{"role", "assistant"}, {"content", nullptr}},
                   {{"role", "tool"}, {"content", "42"}, {"tool_call_id", "call_1"}}});
  body["max_tokens"] = 10;
  body["max_completion_tokens"] = 20.0;  // integral float accepted; preferred over max_tokens
  body["temperature"] = 0;
  body["top_k"] = 5;
  body["min_p"] = 0.1;
  body["repetition_penalty"] = 1.0;
  body["ignore_eos"] = true;
  body["seed"] = -3;
  body["stop"] = "\n\n";
  body["logit_bias"] = {{"7", -100}, {"9", 2.5}};
  body["logprobs"] = true;
  body["top_logprobs"] = 3;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  body["user"] = "someone";
  body["presence_penalty"] = nullptr;
  body["some_future_field"] = Json::array({1, 2, 3});
  body["cache_salt"] = "tenant-a";
  body["prompt_cache_key"] = "session-7";
  body["priority"] = -3;
  ApiResult<GenerationSpec> r = parse_chat_request(body, kLimits);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GenerationSpec& s = r.value();
  EXPECT_EQ(s.messages[1].content, "a\nb");
  EXPECT_EQ(s.messages[2].content, "");
  EXPECT_EQ(s.messages[3].tool_call_id, "call_1");
  EXPECT_EQ(s.max_tokens, 20);
  EXPECT_EQ(s.sampling.temperature, 0.0f);
  EXPECT_EQ(s.sampling.top_k, 5);
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_EQ(s.sampling.seed, static_cast<uint64_t>(-3));
  EXPECT_EQ(s.stop, std::vector<std::string>{"\n\n"});
  ASSERT_EQ(s.sampling.logit_bias.size(), 2u);
  EXPECT_TRUE(s.logprobs);
  EXPECT_EQ(s.top_logprobs, 3);
  EXPECT_EQ(s.sampling.logprobs, 3);
  EXPECT_TRUE(s.include_usage);
  EXPECT_EQ(s.cache_salt, "tenant-a");
  EXPECT_EQ(s.prompt_cache_key, "session-7");
  EXPECT_EQ(s.priority, -3);
  EXPECT_EQ(s.work_class, engine::WorkClass::kInteractive);  // the Batch API's lines are batch
}

TEST(CompletionRequestTest, PromptFormsAndDefaults) {
  Json body = completion_body();
  ApiResult<GenerationSpec> r = parse_completion_request(body, kLimits);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().max_tokens, 16);
  ASSERT_EQ(r.value().prompts.size(), 1u);
  EXPECT_FALSE(r.value().prompts[0].is_tokens);

  body["prompt"] = Json::array({"a", "b"});
  r = parse_completion_request(body, kLimits);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().prompts.size(), 2u);

  body["prompt"] = Json::array({1, 2, 3});
  r = parse_completion_request(body, kLimits);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.value().prompts.size(), 1u);
  EXPECT_EQ(r.value().prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));

  body["prompt"] = Json::array({Json::array({1, 2}), Json::array({3})});
  body["logprobs"] = 2;
  body["echo"] = true;
  body["n"] = 2;
  r = parse_completion_request(body, kLimits);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().prompts.size(), 2u);
  EXPECT_TRUE(r.value().logprobs);
  EXPECT_EQ(r.value().top_logprobs, 2);
  EXPECT_TRUE(r.value().echo);

  Json bench = completion_body();  // what vLLM's benchmark client sends
  bench["logprobs"] = nullptr;
  bench["repetition_penalty"] = 1.0;
  bench["ignore_eos"] = true;
  bench["stream"] = true;
  bench["stream_options"] = {{"include_usage", true}};
  r = parse_completion_request(bench, kLimits);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r.value().logprobs);
}

struct BadCase {
  const char* name;
  bool chat;
  Json patch;         // merged into the base body (null value: remove the key)
  const char* param;  // expected `param` ("" = null)
};

class BadRequestTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadRequestTest, Returns400WithParam) {
  const BadCase& c = GetParam();
  Json body = c.chat ? chat_body() : completion_body();
  for (const auto& [k, v] : c.patch.items()) {
    if (v.is_null()) {
      body.erase(k);
    } else {
      body[k] = v;
    }
  }
  ApiResult<GenerationSpec> r =
      c.chat ? parse_chat_request(body, kLimits) : parse_completion_request(body, kLimits);
  ASSERT_FALSE(r.ok()) << c.name << " was accepted";
  EXPECT_EQ(r.error().status, 400);
  EXPECT_EQ(r.error().type, "invalid_request_error");
  EXPECT_FALSE(r.error().message.empty());
  if (std::string(c.param).empty()) {
    EXPECT_FALSE(r.error().param.has_value()) << c.name;
  } else {
    EXPECT_EQ(r.error().param.value_or("<null>"), c.param) << c.name << ": " << r.error().message;
  }
}

const BadCase kBadCases[] = {
    {"temperature 2.5", true, {{"temperature", 2.5}}, "temperature"},
    {"temperature string", true, {{"temperature", "hot"}}, "temperature"},
    {"temperature bool", true, {{"temperature", true}}, "temperature"},
    {"n 0", true, {{"n", 0}}, "n"},
    {"n above max", true, {{"n", 9}}, "n"},
    {"5 stop strings", true, {{"stop", Json::array({"a", "b", "c", "d", "e"})}}, "stop"},
    {"stop not string", true, {{"stop", Json::array({1})}}, "stop[0]"},
    {"stop too long", true, {{"stop", std::string(33, 'x')}}, "stop"},
    {"top_logprobs 21", true, {{"logprobs", true}, {"top_logprobs", 21}}, "top_logprobs"},
    {"top_logprobs without logprobs", true, {{"top_logprobs", 2}}, "top_logprobs"},
    {"logit_bias 101", true, {{"logit_bias", {{"5", 101}}}}, "logit_bias"},
    {"logit_bias key", true, {{"logit_bias", {{"abc", 1}}}}, "logit_bias"},
    {"logit_bias id range", true, {{"logit_bias", {{"1000", 1}}}}, "logit_bias"},
    {"stream_options without stream",
     true,
     {{"stream_options", {{"include_usage", true}}}},
     "stream_options"},
    {"max_tokens 0", true, {{"max_tokens", 0}}, "max_tokens"},
    {"max_tokens string", true, {{"max_tokens", "10"}}, "max_tokens"},
    {"max_completion_tokens -1", true, {{"max_completion_tokens", -1}}, "max_completion_tokens"},
    {"seed fractional", true, {{"seed", 1.5}}, "seed"},
    {"top_p 0", true, {{"top_p", 0}}, "top_p"},
    {"min_p 2", true, {{"min_p", 2}}, "min_p"},
    {"top_k -2", true, {{"top_k", -2}}, "top_k"},
    {"presence_penalty 3", true, {{"presence_penalty", 3}}, "presence_penalty"},
    {"frequency_penalty -3", true, {{"frequency_penalty", -3}}, "frequency_penalty"},
    {"repetition_penalty 0", true, {{"repetition_penalty", 0}}, "repetition_penalty"},
    {"stream not bool", true, {{"stream", "yes"}}, "stream"},
    {"model not string", true, {{"model", 5}}, "model"},
    {"cache_salt empty", true, {{"cache_salt", ""}}, "cache_salt"},
    {"prompt_cache_key not string", false, {{"prompt_cache_key", 7}}, "prompt_cache_key"},
    {"prompt_cache_key too long",
     true,
     {{"prompt_cache_key", std::string(1025, 'k')}},
     "prompt_cache_key"},
    {"priority not integer", true, {{"priority", "high"}}, "priority"},
    {"priority fractional", true, {{"priority", 1.5}}, "priority"},
    {"messages missing", true, {{"messages", nullptr}}, "messages"},
    {"messages empty", true, {{"messages", Json::array()}}, "messages"},
    {"messages not array", true, {{"messages", "hi"}}, "messages"},
    {"role unknown",
     true,
     {{"messages", Json::array({Json{{"role", "robot"}, {"content", "x"}}})}},
     "messages[0].role"},
    {"user content missing",
     true,
     {{"messages", Json::array({Json{{"role", "user"}}})}},
     "messages[0].content"},
    {"image part",
     true,
     {{"messages", Json::array({Json{{"role", "user"},
                                     {"content", Json::array({Json{{"type", "image_url"}}})}}})}},
     "messages[0].content[0].type"},
    {"response_format type",
     true,
     {{"response_format", {{"type", "yaml"}}}},
     "response_format.type"},
    {"response_format no schema",
     true,
     {{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}}},
     "response_format.json_schema.schema"},
    {"schema unsupported keyword",
     true,
     {{"response_format",
       {{"type", "json_schema"},
        {"json_schema", {{"name", "x"}, {"schema", {{"type", "string"}, {"format", "regex"}}}}}}}},
     "response_format.json_schema.schema"},
    {"grammar bad", false, {{"grammar", "root ::= undefined"}}, "grammar"},
    {"grammar and regex", false, {{"grammar", "root ::= \"a\""}, {"regex", "a"}}, "grammar"},
    {"regex lookahead", false, {{"regex", "(?=a)b"}}, "regex"},
    {"tool without function",
     true,
     {{"tools", Json::array({Json{{"type", "function"}}})}},
     "tools[0].function"},
    {"prompt missing", false, {{"prompt", nullptr}}, "prompt"},
    {"prompt empty array", false, {{"prompt", Json::array()}}, "prompt"},
    {"prompt mixed", false, {{"prompt", Json::array({"a", 1})}}, "prompt"},
    {"prompt token out of vocab", false, {{"prompt", Json::array({1, 1000})}}, "prompt"},
    {"prompt nested token out of vocab",
     false,
     {{"prompt", Json::array({Json::array({1}), Json::array({-1})})}},
     "prompt[1]"},
    {"prompt empty token array", false, {{"prompt", Json::array({Json::array()})}}, "prompt[0]"},
    {"prompt number", false, {{"prompt", 5}}, "prompt"},
    {"completions logprobs 21", false, {{"logprobs", 21}}, "logprobs"},
    {"completions logprobs bool", false, {{"logprobs", true}}, "logprobs"},
    {"echo not bool", false, {{"echo", "yes"}}, "echo"},
    {"suffix", false, {{"suffix", "tail"}}, "suffix"},
    {"too many choices", false, {{"prompt", Json::array({"a", "b", "c"})}, {"n", 8}}, "n"},
    {"stop_token_ids range", false, {{"stop_token_ids", Json::array({5000})}}, "stop_token_ids"},
};

INSTANTIATE_TEST_SUITE_P(AllCases, BadRequestTest, ::testing::ValuesIn(kBadCases),
                         [](const ::testing::TestParamInfo<BadCase>& info) {
                           std::string n = info.param.name;
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST(StructuredOutputTest, CompilesToGrammar) {
  Json chat = {{"messages", Json::array({Json{{"role", "user"}, {"content", "hi"}}})}};
  chat["response_format"] = {{"type", "json_schema"},
                             {"json_schema",
                              {{"name", "p"},
                               {"strict", true},
                               {"schema",
                                {{"type", "object"},
                                 {"properties", {{"a", {{"type", "integer"}}}}},
                                 {"required", {"a"}}}}}}};
  ApiResult<GenerationSpec> r = parse_chat_request(chat, kLimits);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NE(r.value().grammar.find("root ::="), std::string::npos);
  EXPECT_NE(r.value().grammar.find("\\\"a\\\""), std::string::npos) << r.value().grammar;
  chat["response_format"] = {{"type", "json_object"}};
  r = parse_chat_request(chat, kLimits);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r.value().grammar.find("json-object"), std::string::npos);
  chat["response_format"] = {{"type", "text"}};
  r = parse_chat_request(chat, kLimits);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().grammar, "");
  Json completion = {{"prompt", "x"}, {"regex", "[ab]+"}};
  r = parse_completion_request(completion, kLimits);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NE(r.value().grammar.find("root ::="), std::string::npos);
  completion = {{"prompt", "x"}, {"grammar", "root ::= \"yes\" | \"no\""}};
  r = parse_completion_request(completion, kLimits);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().grammar, "root ::= \"yes\" | \"no\"");
}

TEST(JsonDepthTest, CountsNestingOutsideStrings) {
  EXPECT_EQ(json_nesting_depth(R"({"a":[1,[2]]})", 64), 3);
  EXPECT_EQ(json_nesting_depth(R"({"a":"[[[[\"]]"})", 64), 1);
  EXPECT_EQ(json_nesting_depth("42", 64), 0);
  EXPECT_GT(json_nesting_depth(std::string(100000, '['), 64), 64);
  const JsonShape shape = json_shape(R"({"a": [1, 2.5e3, "x,{[", true, null, {}], "b": -7})", 64);
  EXPECT_EQ(shape.max_depth, 3);
  EXPECT_EQ(shape.containers, 3);  // {, [, {}
  EXPECT_EQ(shape.values, 11);     // 3 containers, keys "a" and "b", 6 scalars
}

TEST(ApiErrorTest, EnvelopeHasAllFields) {
  Json j = ApiError::bad_request("bad", "temperature").to_json();
  ASSERT_TRUE(j.contains("error"));
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_EQ(ApiError::from_status(Status::resource_exhausted("full")).status, 429);
  EXPECT_EQ(ApiError::from_status(Status::unavailable("draining")).status, 503);
  EXPECT_EQ(ApiError::from_status(Status::invalid_argument("x")).status, 400);
  EXPECT_EQ(ApiError::from_status(Status::internal("x")).status, 500);
}

TEST(ServerConfigTest, ValidateNamesTheBadField) {
  ServerConfig c;
  EXPECT_TRUE(c.validate().ok());
  c.port = 70000;
  EXPECT_NE(c.validate().message().find("port"), std::string::npos);
  c = ServerConfig{};
  c.io_threads = 0;
  EXPECT_NE(c.validate().message().find("io_threads"), std::string::npos);
  c = ServerConfig{};
  c.served_model_name.clear();
  EXPECT_NE(c.validate().message().find("served_model_name"), std::string::npos);
  c = ServerConfig{};
  c.max_body_bytes = 10;
  EXPECT_NE(c.validate().message().find("max_body_bytes"), std::string::npos);
}

TEST(SparseRequestTest, PolicyAndBudgetAreRead) {
  Json body = completion_body();
  ApiResult<GenerationSpec> none = parse_completion_request(body, kLimits);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value().sparse_policy.has_value());
  body["sparse"] = {{"policy", "raas"}, {"budget", 256}};
  ApiResult<GenerationSpec> r = parse_completion_request(body, kLimits);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().sparse_policy, "raas");
  EXPECT_EQ(r.value().sparse_budget, 256);
  Json chat = chat_body();
  chat["sparse"] = {{"policy", "quest"}};  // the server's budget
  r = parse_chat_request(chat, kLimits);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().sparse_policy, "quest");
  EXPECT_EQ(r.value().sparse_budget, 0);
}

TEST(SparseRequestTest, BadShapesAre400sNamingTheField) {
  const std::vector<std::pair<Json, std::string>> cases = {
      {"raas", "sparse"},
      {Json::object(), "sparse"},
      {{{"policy", "lru"}}, "sparse.policy"},
      {{{"policy", 3}}, "sparse.policy"},
      {{{"policy", "raas"}, {"budget", 0}}, "sparse.budget"},
      {{{"policy", "raas"}, {"budget", 1.5}}, "sparse.budget"},
      {{{"policy", "raas"}, {"budget", "1024"}}, "sparse.budget"},
      {{{"policy", "raas"}, {"alpha", 0.1}}, "sparse.alpha"},
  };
  for (const auto& [value, param] : cases) {
    Json body = completion_body();
    body["sparse"] = value;
    ApiResult<GenerationSpec> r = parse_completion_request(body, kLimits);
    ASSERT_FALSE(r.ok()) << value.dump();
    EXPECT_EQ(r.error().status, 400) << value.dump();
    EXPECT_EQ(r.error().param.value_or("<null>"), param) << value.dump();
  }
}

TEST(SpeculativeRequestTest, ParsesMethodAndK) {
  Json body = completion_body();
  ApiResult<GenerationSpec> none = parse_completion_request(body, kLimits);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value().speculative.has_value());
  body["speculative"] = {{"method", "ngram"}, {"k", 6}};
  ApiResult<GenerationSpec> r = parse_completion_request(body, kLimits);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().speculative,
            (engine::SpeculativeParams{engine::SpecMethod::kNgram, 6, 3, 1}));
  Json chat = chat_body();
  chat["speculative"] = {{"method", "none"}};  // turns the server's default off
  r = parse_chat_request(chat, kLimits);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().speculative->method, engine::SpecMethod::kNone);
  body["speculative"] = {{"method", "draft-head"}, {"k", 3}};
  r = parse_completion_request(body, kLimits);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().speculative,
            (engine::SpeculativeParams{engine::SpecMethod::kDraftHead, 3, 3, 1}));
  body["speculative"] = {{"method", "draft-model"}, {"k", 5}};
  r = parse_completion_request(body, kLimits);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().speculative,
            (engine::SpeculativeParams{engine::SpecMethod::kDraftModel, 5, 3, 1}));
}

TEST(SpeculativeRequestTest, BadShapesAre400sNamingTheField) {
  const std::vector<std::pair<Json, std::string>> cases = {
      {"ngram", "speculative"},
      {Json::object(), "speculative.method"},
      {{{"method", "eagle"}}, "speculative.method"},
      {{{"method", "ngram"}, {"k", 0}}, "speculative.k"},
      {{{"method", "ngram"}, {"k", 17}}, "speculative.k"},
      {{{"method", "ngram"}, {"k", 2.5}}, "speculative.k"},
      {{{"method", "ngram"}, {"ngram_min", 4}}, "speculative.ngram_max"},
      {{{"method", "ngram"}, {"draft", 1}}, "speculative.draft"},
  };
  for (const auto& [value, param] : cases) {
    Json body = completion_body();
    body["speculative"] = value;
    ApiResult<GenerationSpec> r = parse_completion_request(body, kLimits);
    ASSERT_FALSE(r.ok()) << value.dump();
    EXPECT_EQ(r.error().status, 400) << value.dump();
    EXPECT_EQ(r.error().param.value_or("<null>"), param) << value.dump();
  }
}

TEST(EarlyExitRequestTest, BooleanOrObject) {
  Json body = completion_body();
  ApiResult<GenerationSpec> r = parse_completion_request(body, kLimits);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value().early_exit.has_value());
  body["early_exit"] = true;
  r = parse_completion_request(body, kLimits);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().early_exit, (engine::EarlyExitParams{true, 0.5f, {}}));
  body["early_exit"] = false;  // turns the server's default off
  r = parse_completion_request(body, kLimits);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value().early_exit->enabled);
  body["early_exit"] = {{"threshold", 0.25}, {"layers", {1, 2}}};
  r = parse_completion_request(body, kLimits);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().early_exit, (engine::EarlyExitParams{true, 0.25f, {1, 2}}));
}

TEST(EarlyExitRequestTest, BadShapesAre400sNamingTheField) {
  const std::vector<std::pair<Json, std::string>> cases = {
      {"yes", "early_exit"},
      {{{"threshold", "high"}}, "early_exit.threshold"},
      {{{"layers", 3}}, "early_exit.layers"},
      {{{"layers", {1.5}}}, "early_exit.layers"},
      {{{"layers", {-1}}}, "early_exit.layers"},
      {{{"depth", 3}}, "early_exit.depth"},
  };
  for (const auto& [value, param] : cases) {
    Json body = completion_body();
    body["early_exit"] = value;
    ApiResult<GenerationSpec> r = parse_completion_request(body, kLimits);
    ASSERT_FALSE(r.ok()) << value.dump();
    EXPECT_EQ(r.error().status, 400) << value.dump();
    EXPECT_EQ(r.error().param.value_or("<null>"), param) << value.dump();
  }
}

}  // namespace
}  // namespace keel::server
