// Plain spans through the Jinja engine: which bytes of a rendered text came from untrusted input.
// The span helpers (sorted, merged, shifted), exact propagation (output, `~`, `+`, slicing,
// indexing, iteration, set-blocks, macros) and the conservative rule for built-ins (a new string
// from plain input is wholly plain; passed-through values keep their spans; markup-only results
// stay markup). Real models' templates and control-token injection: tests/tokenizer/
// chat_template_spans_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "jinja/plain_spans.h"
#include "jinja/template.h"
#include "jinja/text_span.h"

namespace keel::jinja {
namespace {

// The text with plain bytes in brackets, e.g. "<u>[hi]</u>".
std::string show(const TrackedText& t) {
  std::string out;
  size_t pos = 0;
  for (const TextSpan& s : t.plain) {
    out += t.text.substr(pos, s.begin - pos) + "[" + t.text.substr(s.begin, s.end - s.begin) + "]";
    pos = s.end;
  }
  return out + t.text.substr(pos);
}

std::string render(const std::string& source, Dict vars) {
  auto t = Template::parse(source);
  EXPECT_TRUE(t.ok()) << t.error().to_string();
  if (!t.ok()) return "";
  auto out = t->render_tracked(vars);
  EXPECT_TRUE(out.ok()) << out.error().to_string();
  return out.ok() ? show(*out) : "";
}

Dict user_vars(const std::string& content) {
  Dict vars;
  vars.set("c", Value::plain(content));
  vars.set("m", Value("<m>"));
  Dict msg;
  msg.set("role", Value("user"));
  msg.set("content", Value::plain(content));
  vars.set("messages", Value(Value::List{Value(std::move(msg))}));
  return vars;
}

TEST(TextSpanTest, HelpersKeepSpansSortedMergedAndShifted) {
  TextSpans s;
  append_span(&s, 2, 4);
  append_span(&s, 4, 6);  // adjacent: merged
  append_span(&s, 8, 8);  // empty: ignored
  append_span(&s, 9, 12);
  EXPECT_EQ(s, (TextSpans{{2, 6}, {9, 12}}));
  EXPECT_TRUE(overlaps(s, 5, 7));
  EXPECT_FALSE(overlaps(s, 6, 9));
  EXPECT_TRUE(overlaps(s, 0, 3));
  TextSpans cut;
  append_spans(&cut, s, 3, 10, 100);
  EXPECT_EQ(cut, (TextSpans{{100, 103}, {106, 107}}));
  const TrackedText t{"abcdefghijkl", s};
  EXPECT_EQ(show(tracked_substr(t, 5, 10)), "[f]ghi[j]");
}

TEST(JinjaPlainSpansTest, ExactOperationsKeepEveryByteOrigin) {
  EXPECT_EQ(render("<u>{{ c }}</u>", user_vars("hi")), "<u>[hi]</u>");
  EXPECT_EQ(render("{{ m ~ c ~ m }}", user_vars("hi")), "<m>[hi]<m>");
  EXPECT_EQ(render("{{ m + c + '!' }}", user_vars("hi")), "<m>[hi]!");
  EXPECT_EQ(render("{{ (m ~ c)[1:5] }}|{{ c[0] }}|{{ c[::-1] }}", user_vars("hey")),
            "m>[he]|[h]|[yeh]");
  EXPECT_EQ(render("{% for ch in c %}<{{ ch }}>{% endfor %}", user_vars("ab")), "<[a]><[b]>");
  EXPECT_EQ(render("{% set x %}<s>{{ c }}{% endset %}{{ x }}", user_vars("hi")), "<s>[hi]");
  EXPECT_EQ(render("{% macro f(t) %}<{{ t }}>{% endmacro %}{{ f(c) }}{{ f(m) }}", user_vars("hi")),
            "<[hi]><<m>>");
  EXPECT_EQ(
      render("{% for x in messages %}{{ x.role }}:{{ x['content'] }}{% endfor %}", user_vars("hi")),
      "user:[hi]");
  EXPECT_EQ(render("{% set ns = namespace(t='') %}{% set ns.t = c %}{{ ns.t }}", user_vars("hi")),
            "[hi]");
}

TEST(JinjaPlainSpansTest, BuiltinsMarkNewStringsFromPlainInputWhollyPlain) {
  EXPECT_EQ(render("{{ c | trim }}|{{ c.upper() }}", user_vars(" hi ")), "[hi]|[ HI ]");
  EXPECT_EQ(render("{{ c.split('|')[1] }}", user_vars("a|b")), "[b]");
  EXPECT_EQ(render("{{ c.replace('x', '<|im_start|>') }}", user_vars("axb")), "[a<|im_start|>b]");
  EXPECT_EQ(render("{{ messages | tojson }}", user_vars("hi")),
            R"([[{"role": "user", "content": "hi"}]])");
  EXPECT_EQ(render("{{ c * 2 }}|{{ c ~ 1 }}", user_vars("hi")), "[hihi]|[hi]1");
  EXPECT_EQ(render("{{ [m, c] | join(':') }}", user_vars("hi")), "[<m>:hi]");
  // A value passed through a built-in keeps its own spans; markup stays markup.
  EXPECT_EQ(render("{{ c | default('x') }}|{{ m | upper }}|{{ [m, c] | first }}", user_vars("hi")),
            "[hi]|<M>|<m>");
  EXPECT_EQ(render("{{ messages[0].get('role') }}", user_vars("hi")), "user");
  // A list printed with user text inside is plain as a whole.
  EXPECT_EQ(render("{{ [c] }}", user_vars("hi")), "[['hi']]");
}

}  // namespace
}  // namespace keel::jinja
