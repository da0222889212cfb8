// Global functions visible to every template: range, namespace, dict, raise_exception,
// strftime_now (Hugging Face's; the clock comes from the BuiltinContext, formatted in UTC) and
// joiner.
#include <ctime>
#include <memory>

#include "jinja/builtin_args.h"
#include "jinja/builtins.h"

namespace keel::jinja {
namespace {

Result<Value> g_range(CallArgs& args, BuiltinContext& ctx) {
  if (!args.named.empty() || args.positional.empty() || args.positional.size() > 3) {
    return Status::invalid_argument("range: expects 1 to 3 integer arguments");
  }
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < args.positional.size(); ++i) {
    const Value& a = args.positional[i];
    if (!a.is_int() && !a.is_bool()) {
      return Status::invalid_argument("range: arguments must be integers, not " +
                                      std::string(a.type_name()));
    }
    v[args.positional.size() == 1 ? 1 : i] = a.as_int();
  }
  int64_t start = v[0];
  int64_t stop = v[1];
  int64_t step = v[2];
  if (step == 0) return Status::invalid_argument("range: step must not be zero");
  // Count without overflow: long double holds every int64 difference exactly enough here.
  long double span =
      step > 0 ? static_cast<long double>(stop) - start : static_cast<long double>(start) - stop;
  long double stride = step > 0 ? static_cast<long double>(step) : -static_cast<long double>(step);
  long double count_ld = span <= 0 ? 0 : (span + stride - 1) / stride;
  if (count_ld > static_cast<long double>(ctx.max_work / 16)) {
    return ctx.charge(ctx.max_work + 1);
  }
  auto count = static_cast<uint64_t>(count_ld);
  KEEL_TRY(ctx.charge(16 * count));
  Value::List out;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    // Modular arithmetic: the result lies between start and stop, intermediates may not.
    uint64_t x = static_cast<uint64_t>(start) + i * static_cast<uint64_t>(step);
    out.emplace_back(static_cast<int64_t>(x));
  }
  return Value(std::move(out));
}

// namespace(key=value, ...) or namespace(dict, key=value, ...); dict(...) likewise.
Result<Dict> keyword_dict(std::string_view fn, CallArgs& args) {
  Dict d;
  if (args.positional.size() > 1) {
    return Status::invalid_argument(std::string(fn) + ": expects at most one positional argument");
  }
  if (args.positional.size() == 1) {
    if (!args.positional[0].is_dict()) {
      return Status::invalid_argument(std::string(fn) + ": positional argument must be a dict");
    }
    d = args.positional[0].as_dict();
  }
  for (auto& [key, value] : args.named) d.set(key, value);
  return d;
}

Result<Value> g_strftime_now(CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("strftime_now", args, {"format"}));
  KEEL_ASSIGN_OR_RETURN(std::string format, b.string_or(0, ""));
  if (format.empty()) return Value("");
  if (format.size() > 256) return Status::invalid_argument("strftime_now: format too long");
  std::time_t t = std::chrono::system_clock::to_time_t(ctx.now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[1024];
  size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &tm);
  if (n == 0) return Status::invalid_argument("strftime_now: cannot format '" + format + "'");
  return Value(std::string(buf, n));
}

}  // namespace

Dict make_globals(BuiltinContext* ctx) {
  Dict g;
  g.set("range", Value::make_callable("range", [ctx](CallArgs& a) { return g_range(a, *ctx); }));
  g.set("namespace", Value::make_callable("namespace", [](CallArgs& a) -> Result<Value> {
          KEEL_ASSIGN_OR_RETURN(Dict d, keyword_dict("namespace", a));
          for (const auto& entry : d.entries) {
            if (holds_reference(entry.second)) {
              return Status::unsupported(
                  "namespace: an attribute cannot hold a namespace or a function");
            }
          }
          return Value::make_namespace(std::move(d));
        }));
  g.set("dict", Value::make_callable("dict", [](CallArgs& a) -> Result<Value> {
          KEEL_ASSIGN_OR_RETURN(Dict d, keyword_dict("dict", a));
          return Value(std::move(d));
        }));
  g.set("raise_exception",
        Value::make_callable("raise_exception", [](CallArgs& a) -> Result<Value> {
          std::string msg = a.positional.empty() ? "" : a.positional[0].to_str();
          return Status::invalid_argument("raised by template: " + msg);
        }));
  g.set("strftime_now", Value::make_callable("strftime_now", [ctx](CallArgs& a) {
          return g_strftime_now(a, *ctx);
        }));
  g.set("joiner", Value::make_callable("joiner", [](CallArgs& a) -> Result<Value> {
          KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("joiner", a, {"sep"}));
          KEEL_ASSIGN_OR_RETURN(std::string text, b.string_or(0, ", "));
          // The separator itself, so that its plain spans (if any) travel with it.
          Value sep = b.get(0) != nullptr && b.get(0)->is_string() ? *b.get(0) : Value(text);
          auto used = std::make_shared<bool>(false);
          return Value::make_callable("joiner", [sep, used](CallArgs&) -> Result<Value> {
            if (!*used) {
              *used = true;
              return Value("");
            }
            return Value(sep);
          });
        }));
  return g;
}

}  // namespace keel::jinja
