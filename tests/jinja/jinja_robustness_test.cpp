// Robustness of the Jinja engine (run under ASan/UBSan in CI): malformed templates give a
// Status, never a crash; runaway templates (endless loops, exponential strings, deep recursion,
// deep nesting) stop at the render limits; and randomly mutated real chat templates parse and
// render without crashing.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "jinja/json_text.h"
#include "jinja/template.h"
#include "support/test_support.h"

namespace keel::jinja {
namespace {

Dict sample_vars() {
  auto v = value_from_json(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "sys"},
      {"role": "user", "content": "hi <think>a</think> there"},
      {"role": "assistant", "content": "ok", "tool_calls": [
        {"id": "abcdefghi", "type": "function",
         "function": {"name": "f", "arguments": {"x": 1}}}]},
      {"role": "tool", "content": "{}", "tool_call_id": "abcdefghi"},
      {"role": "user", "content": "bye"}
    ],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"
  })"),
                           16);
  return v->as_dict();
}

RenderEnv small_limits() {
  RenderEnv env;
  env.now = [] { return std::chrono::system_clock::time_point{}; };
  env.limits.max_output_bytes = 1 << 16;
  env.limits.max_work = 1 << 22;
  env.limits.max_steps = 20'000;
  env.limits.max_call_depth = 8;
  env.limits.max_value_depth = 32;
  return env;
}

// Parses and renders; returns the status (ok or the error).
Status run(std::string_view source, const RenderEnv& env = small_limits()) {
  auto t = Template::parse(source);
  if (!t.ok()) return t.error();
  return t->render(sample_vars(), env).status();
}

TEST(JinjaRobustnessTest, MalformedTemplatesAreErrors) {
  const char* cases[] = {
      "{{",
      "{{ }}",
      "{%",
      "{% %}",
      "{% if %}",
      "{% if x %}",
      "{% for %}",
      "{% for x %}",
      "{% for x in %}{% endfor %}",
      "{% endfor %}",
      "{% else %}",
      "{% set %}",
      "{% set x %}",
      "{% macro %}",
      "{% macro m( %}",
      "{{ [1, 2 }}",
      "{{ {'a' 1} }}",
      "{{ (1, }}",
      "{{ a. }}",
      "{{ a[ }}",
      "{{ a | }}",
      "{{ a is }}",
      "{{ 'x }}",
      "{{ \"x }}",
      "{# never closed",
      "{% raw %}never closed",
      "{{ 1 + + }}",
      "{{ ) }}",
      "{{ ] }}",
      "{{ } }}",
      "{{ @ }}",
      "{{ 1 if }}",
      "{{ not }}",
      "{{ f(a=1, 2) }}",
      "{{ f(*x) }}",
      "{% for x in y recursive %}",
      "{% if x %}{% elif %}{% endif %}",
      "{% if x %}{% else %}{% else %}{% endif %}",
      "{{ 99999999999999999999 }}",
      "{{ '\\x4' }}",
      "{% set a.b.c = 1 %}",
      "{% set a, b %}",
      "{% macro m(a=1, b) %}{% endmacro %}",
      "{{ a[1, 2] }}",
      "{% extends 'x' %}",
      "{% continue %}",
      "{% for x in y %}{% macro m() %}{% break %}{% endmacro %}{% endfor %}",
  };
  for (const char* c : cases) {
    Status s = run(c);
    EXPECT_FALSE(s.ok()) << "accepted: " << c;
    EXPECT_NE(s.message().find("line "), std::string::npos) << c << " -> " << s.message();
  }
}

TEST(JinjaRobustnessTest, RuntimeErrorsAreStatuses) {
  const char* cases[] = {
      "{{ x + 1 }}",
      "{{ x.y.z }}",
      "{{ messages[0].content + 1 }}",
      "{{ 1 / 0 }}",
      "{{ 1.0 // 0 }}",
      "{{ 'a' < 1 }}",
      "{{ none|tojson }}{{ x|tojson }}",
      "{{ 1 in 2 }}",
      "{% for x in none %}{% endfor %}",
      "{% for x in 5 %}{% endfor %}",
      "{{ 'a'.split('') }}",
      "{{ [1][::0] }}",
      "{{ range(1, 2, 0) }}",
      "{{ range('a') }}",
      "{{ 5() }}",
      "{{ 'x'(1) }}",
      "{{ namespace(1) }}",
      "{{ {1: 2} }}",
      "{{ raise_exception('stop') }}",
      "{{ 'a' % 1 }}",
      "{{ messages|items }}",
      "{{ 1|length }}",
      "{{ (2 ** 62) * 4 }}",
      "{{ -9223372036854775807 - 2 }}",
      "{{ [1, 'a']|sort }}",
      "{{ 'abc'|tojson(indent=-1) }}",
      "{{ strftime_now('%Q' * 200) }}",
  };
  for (const char* c : cases) {
    Status s = run(c);
    EXPECT_FALSE(s.ok()) << "accepted: " << c;
  }
}

TEST(JinjaRobustnessTest, NamespacesCannotFormCycles) {
  // Namespaces are the only mutable values; if one could hold itself (directly or through a
  // list, a dict or a bound method) the render would leak it. LeakSanitizer checks the rest.
  const char* cases[] = {
      "{% set ns = namespace() %}{% set ns.me = ns %}",
      "{% set ns = namespace() %}{% set ns.l = [1, [ns]] %}",
      "{% set ns = namespace() %}{% set d = {'n': ns} %}{% set ns.f = d.get %}",
      "{% set a = namespace() %}{% set b = namespace(x=a) %}",
      "{% set a = namespace() %}{% set b = namespace(x=[range]) %}",
  };
  for (const char* c : cases) {
    Status s = run(c);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << c << " -> " << s.to_string();
  }
  EXPECT_TRUE(run("{% set ns = namespace(l=[1, {'a': 'b'}]) %}{% set ns.x = ns.l %}").ok());
}

TEST(JinjaRobustnessTest, RunawayTemplatesHitLimits) {
  const char* cases[] = {
      // Loops: the step budget.
      "{% for i in range(100000) %}{% endfor %}",
      "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
      // Output size.
      "{% for i in range(10000) %}{{ 'x' * 100 }}{% endfor %}",
      // Exponential strings and lists: the work budget.
      "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
      "{% endfor %}",
      "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}"
      "{% endfor %}",
      "{{ 'x' * 1000000000000 }}",
      "{{ [1] * 1000000000000 }}",
      "{{ range(1000000000000) }}",
      "{{ 'ab'|replace('', 'x' * 100000) }}",
      "{{ 'a'|center(100000000) }}",
      "{{ [[[[1]]]]|tojson(indent=1024) * 100000 }}",
      // Recursion: the call depth.
      "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
      "{% macro f(n) %}{{ f(n) }}{{ f(n) }}{% endmacro %}{{ f(1) }}",
      // Nesting of values kept in variables.
      "{% set ns = namespace(v=1) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}{% endfor %}",
  };
  for (const char* c : cases) {
    Status s = run(c);
    EXPECT_FALSE(s.ok()) << "accepted: " << c;
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << c << " -> " << s.to_string();
  }
}

TEST(JinjaRobustnessTest, DeepSyntaxNestingIsRefused) {
  for (const std::string& open : {std::string("("), std::string("["), std::string("not "),
                                  std::string("-"), std::string("{'a': ")}) {
    std::string src = "{{ ";
    for (int i = 0; i < 5000; ++i) src += open;
    src += "1 }}";
    Status s = run(src);
    EXPECT_FALSE(s.ok()) << open;
  }
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_FALSE(run(ifs).ok());
  // A left-deep operator chain is as deep as it is long: refused past the limit, so evaluating
  // or destroying the tree cannot exhaust the stack.
  auto chain = [](int n, const char* op) {
    std::string src = "{{ 1";
    for (int i = 0; i < n; ++i) src += op;
    return src + " }}";
  };
  EXPECT_TRUE(run(chain(100, " + 1")).ok());
  EXPECT_FALSE(run(chain(3, " is defined")).ok());  // tests do not chain at all
  for (const char* op : {" + 1", " or 1", " and 1", "|string", "[0:1]", ".x", "()"}) {
    Status s = run(chain(20000, op));
    EXPECT_FALSE(s.ok()) << op;
    EXPECT_NE(s.message().find("nests deeper than"), std::string::npos) << s.message();
  }
  // `~` and comparison chains are flat lists of operands: any length is fine.
  EXPECT_TRUE(run(chain(20000, " ~ 1")).ok());
  EXPECT_TRUE(run(chain(20000, " < 2")).ok());
}

TEST(JinjaRobustnessTest, DeepestAcceptedRecursionFitsTheStack) {
  // Macro recursion at the default call-depth limit, each level inside an expression close to the
  // depth limit and statements nested deeply: must end with a clean error, not a stack overflow.
  // The recursive call is the leftmost leaf of a left-deep chain, so it runs at full depth.
  std::string expr = "f(n + 1)";
  for (int i = 0; i < 120; ++i) expr += " + ''";
  std::string body = "{{ " + expr + " }}";
  for (int i = 0; i < 40; ++i) body = "{% if true %}" + body + "{% endif %}";
  std::string src = "{% macro f(n) %}" + body + "{% endmacro %}{{ f(0) }}";
  auto t = Template::parse(src);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  auto out = t->render(sample_vars(), RenderEnv{});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code(), StatusCode::kResourceExhausted);
}

// Deterministic mutations of the real templates: byte flips, deletions, duplications of
// Jinja's structural characters and truncations. Whatever parses must render or fail cleanly.
TEST(JinjaRobustnessTest, MutatedRealTemplatesNeverCrash) {
  KEEL_REQUIRE_SHARED();
  std::vector<std::string> sources;
  for (const auto& entry :
       std::filesystem::directory_iterator(testing::shared_path("chat-templates"))) {
    if (entry.path().extension() == ".jinja") sources.push_back(testing::read_file(entry.path()));
  }
  ASSERT_EQ(sources.size(), 10u);
  std::mt19937 rng(1234);
  const std::string pieces[] = {"{", "}", "%", "#", "-",  "(", ")",    "[",   "]",      "'",  "\"",
                                "|", ".", ",", " ", "\n", "~", "not ", "if ", "endfor", "{{", "%}"};
  int parsed = 0;
  int rendered = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    std::string s = sources[rng() % sources.size()];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t pos = rng() % s.size();
      switch (rng() % 4) {
        case 0:
          s[pos] = static_cast<char>(rng() % 256);
          break;
        case 1:
          s.erase(pos, 1 + rng() % 8);
          break;
        case 2:
          s.insert(pos, pieces[rng() % std::size(pieces)]);
          break;
        default:
          s.resize(pos);
          break;
      }
    }
    auto t = Template::parse(s);
    if (!t.ok()) {
      EXPECT_FALSE(t.error().message().empty());
      continue;
    }
    ++parsed;
    auto out = t->render(sample_vars(), small_limits());
    if (out.ok()) ++rendered;
  }
  // The mutations leave plenty of templates intact enough to render.
  EXPECT_GT(parsed, 100);
  EXPECT_GT(rendered, 50);
}

}  // namespace
}  // namespace keel::jinja
