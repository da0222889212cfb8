// The Jinja2-subset engine feature by feature: literals and operators, tests, filters, string
// and dict methods, statements (if/for/set/macro/break/continue/raw), scoping, whitespace
// control, and error reporting with line and column. Expected values follow Jinja2 3.x with
// Hugging Face's chat-template settings (trim_blocks, lstrip_blocks).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "jinja/json_text.h"
#include "jinja/template.h"

namespace keel::jinja {
namespace {

// The render of `source` with `vars` (a JSON object), or "ERROR: <message>".
std::string render(std::string_view source, const nlohmann::ordered_json& vars = {}) {
  auto t = Template::parse(source);
  if (!t.ok()) return "ERROR: " + t.error().message();
  auto v = value_from_json(vars.is_null() ? nlohmann::ordered_json::object() : vars, 64);
  if (!v.ok()) return "BAD VARS";
  RenderEnv env;
  env.now = [] {
    return std::chrono::sys_days{std::chrono::year{2024} / 12 / 31} + std::chrono::hours{23};
  };
  auto out = t->render(v->as_dict(), env);
  if (!out.ok()) return "ERROR: " + out.error().message();
  return *out;
}

struct Case {
  const char* source;
  const char* expected;
};

void check_all(std::initializer_list<Case> cases) {
  for (const Case& c : cases) EXPECT_EQ(render(c.source), c.expected) << "template: " << c.source;
}

TEST(JinjaTest, ArithmeticFollowsPython) {
  check_all({
      {"{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 2 ** 10 }}", "7|9|1024"},
      {"{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 10 / 5 }}", "3|-4|2|3.5|2.0"},
      {"{{ 1.5 + 1 }}|{{ 0.1 + 0.2 }}|{{ 1e16 }}|{{ 1e-5 }}|{{ 3.0 }}|{{ 1e3 }}",
       "2.5|0.30000000000000004|1e+16|1e-05|3.0|1000.0"},
      {"{{ 'ab' * 3 }}|{{ [1, 2] + [3] }}|{{ 'a' ~ 1 ~ none ~ true }}",
       "ababab|[1, 2, 3]|a1NoneTrue"},
      {"{{ -3 }}|{{ - -3 }}|{{ +2 }}|{{ 1 - 2 - 3 }}", "-3|3|2|-4"},
  });
}

TEST(JinjaTest, LiteralsAndOutput) {
  check_all({
      {"{{ \"a\" \"b\" }}|{{ 'tab\\there' }}|{{ '\\u00e9' }}|{{ '\\x41' }}",
       "ab|tab\there|\xC3\xA9|A"},
      {"{{ [1, 'a', none, true, 1.5] }}|{{ {'k': 'v'} }}|{{ none }}|{{ false }}",
       "[1, 'a', None, True, 1.5]|{'k': 'v'}|None|False"},
      {"{{ \"it's\" }}|{{ [\"it's\"] }}|{{ True }}|{{ None is none }}",
       "it's|[\"it's\"]|True|True"},
      {"{{ 1, 2 }}", "[1, 2]"},
  });
}

TEST(JinjaTest, Comparisons) {
  check_all({
      {"{{ 1 == 1.0 }}|{{ true == 1 }}|{{ [1, [2]] == [1, [2]] }}|{{ {'a': 1} == {'a': 1} }}",
       "True|True|True|True"},
      {"{{ 'a' < 'b' }}|{{ [1, 2] < [1, 3] }}|{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 1 != 2 }}",
       "True|True|True|False|True"},
      {"{{ 'a' in 'cat' }}|{{ 2 in [1, 2] }}|{{ 'k' in {'k': 1} }}|{{ 'z' not in 'abc' }}",
       "True|True|True|True"},
      {"{{ 'x' in undefined_thing }}|{{ x == x }}|{{ none == false }}", "False|True|False"},
  });
}

TEST(JinjaTest, LogicAndConditionals) {
  check_all({
      {"{{ 'yes' if 1 else 'no' }}|{{ 'yes' if 0 else 'no' }}|[{{ 'yes' if 0 }}]", "yes|no|[]"},
      {"{{ 0 or 'b' }}|{{ 'a' and 'b' }}|{{ not 0 }}|{{ not not 'x' }}", "b|b|True|True"},
      {"{{ not x is defined }}|{{ x is not defined }}|{{ not (1 == 1 or 2 == 3) }}",
       "True|True|False"},
  });
}

TEST(JinjaTest, Tests) {
  check_all({
      {"{{ x is defined }}|{{ x is undefined }}|{{ none is none }}|{{ 'a' is string }}",
       "False|True|True|True"},
      {"{{ 1 is number }}|{{ 1 is integer }}|{{ 1.0 is float }}|{{ true is boolean }}",
       "True|True|True|True"},
      {"{{ {} is mapping }}|{{ [] is iterable }}|{{ 'a' is iterable }}|{{ 1 is iterable }}",
       "True|True|True|False"},
      {"{{ 3 is odd }}|{{ 4 is even }}|{{ 9 is divisibleby 3 }}|{{ 2 is equalto 2 }}",
       "True|True|True|True"},
      {"{{ false is false }}|{{ 0 is false }}|{{ true is true }}|{{ 'ab' is lower }}",
       "True|False|True|True"},
      {"{{ 3 is gt 2 }}|{{ 3 is lt(2) }}|{{ 2 is in [1, 2] }}|{{ none is sameas none }}",
       "True|False|True|True"},
  });
}

TEST(JinjaTest, IndexingAndSlicing) {
  check_all({
      {"{{ 'abc'[1] }}|{{ 'abc'[-1] }}|{{ 'h\xC3\xA9llo'[1:3] }}|{{ 'abcdef'[::2] }}",
       "b|c|\xC3\xA9l|ace"},
      {"{{ [1, 2, 3, 4][::-1] }}|{{ [1, 2, 3, 4][1:] }}|{{ [1, 2, 3, 4][:-1] }}",
       "[4, 3, 2, 1]|[2, 3, 4]|[1, 2, 3]"},
      {"{{ [1, 2, 3][5] is defined }}|{{ [1, 2, 3][-5:10] }}|{{ [1, 2, 3][3:1] }}",
       "False|[1, 2, 3]|[]"},
      {"{{ {'a': {'b': [10, 20]}}.a.b[1] }}|{{ {'a': 1}['a'] }}|{{ [[7]].0.0 }}", "20|1|7"},
  });
}

TEST(JinjaTest, Filters) {
  check_all({
      {"{{ '  hi  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'Hello'|upper }}|{{ 'Hello'|lower }}",
       "hi|hi|HELLO|hello"},
      {"{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}|{{ [1, 2, 3]|length }}",
       "Hello World|Hello|3"},
      {"{{ 'h\xC3\xA9llo'|length }}|{{ {'a': 1}|count }}|{{ x|length }}", "5|1|0"},
      {"{{ x|default('d') }}|{{ ''|default('d') }}|{{ ''|default('d', true) }}|{{ x|d(1) }}",
       "d||d|1"},
      {"{{ [1, 2, 3]|join(', ') }}|{{ 'a-b-c'|replace('-', '+') }}|{{ 'aaa'|replace('a', 'b', 2) "
       "}}",
       "1, 2, 3|a+b+c|bba"},
      {"{% for k, v in {'x': 1, 'y': 2}|items %}{{ k }}={{ v }};{% endfor %}", "x=1;y=2;"},
      {"{{ [1, 2, 3]|first }}|{{ [1, 2, 3]|last }}|{{ 'abc'|list }}|{{ 'abc'|reverse }}",
       "1|3|['a', 'b', 'c']|cba"},
      {"{{ [3, 1, 2]|sort }}|{{ ['b', 'A', 'a']|sort }}|{{ [1, 1, 2]|unique|list }}",
       "[1, 2, 3]|['A', 'a', 'b']|[1, 2]"},
      {"{{ [1, 2, 3]|sum }}|{{ [1, 5, 3]|max }}|{{ [1, 5, 3]|min }}|{{ -3|abs }}", "6|5|1|3"},
      {"{{ '42'|int + 1 }}|{{ '1.5'|float }}|{{ 2.5|round }}|{{ 3.14159|round(2) }}|{{ 'x'|int }}",
       "43|1.5|2.0|3.14|0"},
      {"{{ \"line1\\nline2\"|indent(2) }}|{{ 'x'|center(5) }}|{{ 'a b c'|wordcount }}",
       "line1\n  line2|  x  |3"},
      {"{{ '<a href=\"x\">'|e }}|{{ 5|string ~ 'x' }}|{{ 'a'|safe }}",
       "&lt;a href=&#34;x&#34;&gt;|5x|a"},
  });
}

TEST(JinjaTest, SelectMapAndFriends) {
  const char* msgs = "{% set m = [{'r': 'u', 'c': 1}, {'r': 'a', 'c': 2}, {'r': 'u', 'c': 3}] %}";
  check_all({
      {(std::string(msgs) + "{{ m|selectattr('r', 'equalto', 'u')|map(attribute='c')|list }}")
           .c_str(),
       "[1, 3]"},
      {(std::string(msgs) + "{{ m|rejectattr('r', 'equalto', 'u')|list|length }}").c_str(), "1"},
      {"{{ [1, 2, 3, 4]|reject('odd')|list }}|{{ [0, 1, 2]|select|list }}", "[2, 4]|[1, 2]"},
      {"{{ ['a', 'b']|map('upper')|join }}|{{ ['code', 'x']|reject('equalto', 'code')|join(',') }}",
       "AB|x"},
      {"{{ [{'a': {'b': 1}}]|map(attribute='a.b')|list }}|{{ [{}]|map(attribute='z', "
       "default=0)|list }}",
       "[1]|[0]"},
  });
}

TEST(JinjaTest, ToJsonMatchesPythonJsonDumps) {
  check_all({
      {"{{ {'a': 1, 'b': [1, 2], 'c': none, 'd': true, 'e': 1.5}|tojson }}",
       "{\"a\": 1, \"b\": [1, 2], \"c\": null, \"d\": true, \"e\": 1.5}"},
      {"{{ {'b': 1, 'a': [2]}|tojson(indent=2) }}", "{\n  \"b\": 1,\n  \"a\": [\n    2\n  ]\n}"},
      {"{{ '\xC3\xA9\"\\n\\t\\\\'|tojson }}", "\"\xC3\xA9\\\"\\n\\t\\\\\""},
      {"{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ []|tojson(indent=4) }}",
       "{\"a\": 2, \"b\": 1}|[]"},
  });
  // Key order of request JSON is kept.
  nlohmann::ordered_json vars;
  vars["tool"] = nlohmann::ordered_json::parse(R"({"z": 1, "a": {"y": 2, "b": 3}})");
  EXPECT_EQ(render("{{ tool|tojson }}", vars), "{\"z\": 1, \"a\": {\"y\": 2, \"b\": 3}}");
}

TEST(JinjaTest, StringAndDictMethods) {
  check_all({
      {"{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}",
       "['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']"},
      {"{{ 'a.b.c'.rsplit('.', 1) }}|{{ 'xhix'.strip('x') }}|{{ '\\n\\nhi\\n'.lstrip('\\n') }}|"
       "{{ 'hi  '.rstrip() }}.",
       "['a.b', 'c']|hi|hi\n|hi."},
      {"{{ 'hello'.startswith('he') }}|{{ 'hello'.endswith(('lo', 'x')) }}|{{ 'Hi'.upper() }}",
       "True|True|HI"},
      {"{{ 'abc'.find('c') }}|{{ 'aXbXc'.count('X') }}|{{ '-'.join(['a', 'b']) }}|"
       "{{ 'x'.replace('', '-') }}",
       "2|2|a-b|-x-"},
      {"{{ {'a': 1}.get('b', 9) }}|{{ {'a': 1}.get('a') }}|{{ {'a': 1, 'b': 2}.keys()|list }}|"
       "{{ {'a': 1}.values()|list }}",
       "9|1|['a', 'b']|[1]"},
      {"{% for k, v in {'a': 1, 'b': 2}.items() if k != 'a' %}{{ k }}{{ v }}{% endfor %}", "b2"},
      {"{{ 'x'.nosuchmethod is defined }}|{{ 'a\\nb'.split('\\n')[-1] }}", "False|b"},
  });
}

TEST(JinjaTest, ForLoops) {
  check_all({
      {"{% for i in range(5) if i is odd %}{{ loop.index }}/{{ loop.length }}:{{ i }} {% endfor %}",
       "1/2:1 2/2:3 "},
      {"{% for i in [] %}x{% else %}empty{% endfor %}", "empty"},
      {"{% for i in range(10) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}"
       "{% continue %}{% endif %}{{ i }}{% endfor %}",
       "02"},
      {"{% for i in range(3) %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}"
       "{{ loop.last }};{% endfor %}",
       "03TrueFalse;12FalseFalse;21FalseTrue;"},
      {"{% for i in range(3) %}{{ loop.cycle('a', 'b') }}{{ loop.previtem is defined }}"
       "{% endfor %}",
       "aFalsebTrueaTrue"},
      {"{% for c in 'h\xC3\xA9' %}[{{ c }}]{% endfor %}|{% for k in {'a': 1, 'b': 2} %}{{ k }}"
       "{% endfor %}",
       "[h][\xC3\xA9]|ab"},
      {"{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }},{% endfor %}", "3,7,"},
      {"{% for x in [1] %}{% for y in [2] %}{{ loop.index }}{{ x }}{{ y }}{% endfor %}{% endfor %}",
       "112"},
      {"{{ range(2, 10, 3)|list }}|{{ range(5, 0, -2)|list }}|{{ range(0)|list }}",
       "[2, 5, 8]|[5, 3, 1]|[]"},
  });
}

TEST(JinjaTest, ScopingAndNamespaces) {
  check_all({
      // A loop body's `set` does not leak out; a namespace carries state across iterations.
      {"{% set x = 1 %}{% for i in range(3) %}{% set x = i %}{% endfor %}{{ x }}", "1"},
      {"{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}"
       "{% endfor %}{{ ns.n }}",
       "6"},
      {"{% set ns = namespace() %}{% set ns.a = 'v' %}{{ ns.a }}{{ ns.b is defined }}", "vFalse"},
      {"{% if true %}{% set y = 5 %}{% endif %}{{ y }}", "5"},
      {"{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set s %}block {{ 1 + 1 }}{% endset %}{{ s }}",
       "12|block 2"},
      {"{% set d = dict(a=1, b=2) %}{{ d }}|{{ namespace(x=1).x }}", "{'a': 1, 'b': 2}|1"},
  });
}

TEST(JinjaTest, Macros) {
  check_all({
      {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
       "{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(name='Cy') }}",
       "Hi Bob! Hi Al? Hi Cy!"},
      {"{% set top = 'T' %}{% macro m() %}{{ top }}{% endmacro %}{% for i in [1] %}"
       "{% set inner = 'I' %}{{ m() }}{% endfor %}",
       "T"},
      {"{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}",
       "321"},
  });
}

TEST(JinjaTest, WhitespaceControl) {
  // Hugging Face's settings: trim_blocks drops the newline after a block tag, lstrip_blocks the
  // indentation before one; '-' strips all whitespace on its side; '+' keeps it.
  EXPECT_EQ(render("{%- if true -%}\n   stripped\n{%- endif %}\n  {% if true %}\n  kept\n"
                   "  {% endif %}\n{# comment #}\nafter\n"),
            "stripped  kept\nafter");
  EXPECT_EQ(render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(render("a\n{{ 'b' }}\nc"), "a\nb\nc");
  EXPECT_EQ(render("  {%+ if true %}x{% endif +%}\ny"), "  x\ny");
  EXPECT_EQ(render("{# a -#}   x {#- b #}"), "x");
  EXPECT_EQ(render("line\n"), "line");  // one trailing newline is dropped
  EXPECT_EQ(render("line\n\n"), "line\n");
  EXPECT_EQ(render("a\r\nb"), "a\nb");
  EXPECT_EQ(render("{% raw %}{{ not rendered }}{% endraw %}|{{ '%}' }}|{{ {'a': {'b': 1}} }}"),
            "{{ not rendered }}|%}|{'a': {'b': 1}}");
}

TEST(JinjaTest, GlobalsAndClock) {
  check_all({
      {"{{ strftime_now('%Y-%m-%d %H:%M') }}|{{ strftime_now('%d %b %Y') }}",
       "2024-12-31 23:00|31 Dec 2024"},
      {"{% set j = joiner('; ') %}{% for i in range(3) %}{{ j() }}{{ i }}{% endfor %}", "0; 1; 2"},
      {"{{ strftime_now is defined }}|{{ raise_exception is defined }}", "True|True"},
  });
  EXPECT_EQ(render("{{ raise_exception('no ' ~ 'way') }}"),
            "ERROR: line 1, column 4: raised by template: no way");
}

TEST(JinjaTest, VariablesAreVisibleAndShadowGlobals) {
  nlohmann::ordered_json vars = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                 {"range", "shadowed"}};
  EXPECT_EQ(render("{{ messages[0].role }}:{{ messages[0]['content'] }}|{{ range }}", vars),
            "user:hi|shadowed");
  EXPECT_EQ(render("{% for m in messages %}{{ m.missing is defined }}{{ m.role|upper }}"
                   "{% endfor %}",
                   vars),
            "FalseUSER");
}

TEST(JinjaTest, ErrorsNameLineAndColumn) {
  EXPECT_EQ(render("ab\n{% if x %}"),
            "ERROR: line 2, column 1: 'if' block is never closed (expected 'elif' or 'else' or "
            "'endif')");
  EXPECT_EQ(render("{{ 1 + }}"), "ERROR: line 1, column 8: expected an expression, found '}}'");
  EXPECT_EQ(render("x\n  {{ 'a' + 1 }}"),
            "ERROR: line 2, column 10: unsupported operand types for +: 'str' and 'int'");
  EXPECT_EQ(render("{{ x.y }}"), "ERROR: line 1, column 5: 'x' is undefined");
  EXPECT_EQ(render("{{ x + 1 }}"), "ERROR: line 1, column 6: 'x' is undefined");
  EXPECT_EQ(render("{{ 'a'|nosuch }}"), "ERROR: line 1, column 7: unknown filter 'nosuch'");
  EXPECT_EQ(render("{{ 1 is nosuch }}"), "ERROR: line 1, column 6: unknown test 'nosuch'");
  EXPECT_EQ(render("{% include 'x' %}"), "ERROR: line 1, column 1: unsupported tag 'include'");
  EXPECT_EQ(render("{% endif %}"), "ERROR: line 1, column 1: unknown or misplaced tag 'endif'");
  EXPECT_EQ(render("{% break %}"), "ERROR: line 1, column 1: 'break' outside of a for loop");
  EXPECT_EQ(render("{{ 'abc"), "ERROR: line 1, column 4: unterminated string literal");
  EXPECT_EQ(render("{{ (1 }}"), "ERROR: line 1, column 7: unexpected '}', expected ')'");
  EXPECT_EQ(render("{{ (1"), "ERROR: line 1, column 1: unterminated '{{' tag (expected '}}')");
  EXPECT_EQ(render("{{ 1 ) }}"), "ERROR: line 1, column 6: unexpected ')'");
  EXPECT_EQ(render("{# x"), "ERROR: line 1, column 1: unterminated comment");
  EXPECT_EQ(render("{{ 1 // 0 }}"), "ERROR: line 1, column 6: integer division or modulo by zero");
  EXPECT_EQ(render("{% set x = 1 %}{% set x.a = 2 %}"),
            "ERROR: line 1, column 16: cannot set 'a' on 'x': not a namespace() object");
  EXPECT_EQ(render("{{ 9223372036854775807 + 1 }}"),
            "ERROR: line 1, column 24: integer overflow in '+'");
  EXPECT_EQ(render("{% for a, b in [1] %}{% endfor %}"),
            "ERROR: line 1, column 1: cannot unpack int into 2 names");
  EXPECT_EQ(render("{{ none.x is defined }}{{ none|length }}"),
            "ERROR: line 1, column 31: length: object of type 'NoneType' has no len()");
}

}  // namespace
}  // namespace keel::jinja
