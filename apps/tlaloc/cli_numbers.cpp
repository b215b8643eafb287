#include "apps/tlaloc/cli_numbers.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "tlaloc/core/error.h"

namespace tlaloc::app {
namespace {

// "" when `s` is a decimal integer of the kind (signed or not) and fits 64 bits; `s` becomes its
// canonical text (no leading zeros), so CLI11's base-0 conversion reads the decimal value.
std::string to_decimal(std::string& s, bool is_signed) {
  const char* b = s.data();
  const char* e = b + s.size();
  bool neg = b != e && *b == '-';
  const char* digits = neg ? b + 1 : b;
  if (digits == e) return "'" + s + "' is not a decimal integer";
  for (const char* p = digits; p != e; ++p)
    if (*p < '0' || *p > '9') return "'" + s + "' is not a decimal integer";
  if (neg && !is_signed) return "Value " + s + " is negative; it must be >= 0";
  std::errc ec;
  if (is_signed) {
    int64_t v = 0;
    ec = std::from_chars(b, e, v).ec;
    if (ec == std::errc()) s = std::to_string(v);
  } else {
    uint64_t v = 0;
    ec = std::from_chars(digits, e, v).ec;
    if (ec == std::errc()) s = std::to_string(v);
  }
  if (ec == std::errc::result_out_of_range) return "'" + s + "' is out of range";
  return ec == std::errc() ? "" : "'" + s + "' is not a decimal integer";
}

// "" when `s` is a whole number in strtod's syntax (an empty value, CLI11 alone reads as 0).
std::string to_real(const std::string& s) {
  char* end = nullptr;
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0])))
    return "'" + s + "' is not a number";
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() ? "" : "'" + s + "' is not a number";
}

}  // namespace

void require_strict_numbers(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    const bool is_int = type.rfind("INT", 0) == 0, is_uint = type.rfind("UINT", 0) == 0;
    // Each runs before the option's other validators (range checks) and its conversion.
    if (is_int || is_uint)
      opt->transform(CLI::Validator([is_int](std::string& s) { return to_decimal(s, is_int); }, "",
                                    "decimal"));
    else if (type.rfind("FLOAT", 0) == 0)
      opt->transform(CLI::Validator([](std::string& s) { return to_real(s); }, "", "number"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    require_strict_numbers(*sub);
}

void refuse_empty_values(CLI::App& app) {
  static const std::set<std::string> own_message = {"--save",   "--resume",    "--output",
                                                    "--plot",   "--confusion", "--boundary",
                                                    "--prompt", "--title"};
  std::string what = app.get_name();
  for (const CLI::App* p = app.get_parent(); p && p->get_parent(); p = p->get_parent())
    what = p->get_name() + " " + what;
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_name().rfind("TEXT", 0) != 0) continue;
    const auto& names = opt->get_lnames();
    if (std::any_of(names.begin(), names.end(),
                    [](const std::string& n) { return own_message.count("--" + n) > 0; }))
      continue;
    const std::string flag = opt->get_name();
    opt->check(CLI::Validator(
        [what, flag](std::string& s) -> std::string {
          if (s.empty()) fail("{}: {} is empty (an unset variable?)", what, flag);
          return "";
        },
        "", "non_empty"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    refuse_empty_values(*sub);
}

void check_thread_environment() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (!env || !*env) return;
  // "8" or a list for nested levels ("8,2"): the first value sizes the team tlaloc starts.
  std::string first(env, std::strcspn(env, ","));
  while (!first.empty() && std::isspace(static_cast<unsigned char>(first.back()))) first.pop_back();
  size_t start = 0;
  while (start < first.size() && std::isspace(static_cast<unsigned char>(first[start]))) ++start;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(first.data() + start, first.data() + first.size(), v);
  if (p != first.data() + first.size()) return;  // not a number: OpenMP warns and ignores it
  if (ec == std::errc::result_out_of_range || v > uint64_t(kMaxThreads))
    fail(
        "OMP_NUM_THREADS={} asks for more than {} threads (OpenMP would fail starting them); set "
        "it to at most {} or unset it",
        env, kMaxThreads, kMaxThreads);
}

CLI::Validator finite_non_negative() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v < 0)
          return "Value " + s + " must be a finite number >= 0";
        return "";
      },
      "", "finite_non_negative");
}

}  // namespace tlaloc::app
