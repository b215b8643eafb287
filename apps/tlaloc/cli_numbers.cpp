#include "apps/tlaloc/cli_numbers.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

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

}  // namespace

void require_decimal_integers(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    const bool is_int = type.rfind("INT", 0) == 0, is_uint = type.rfind("UINT", 0) == 0;
    if (!is_int && !is_uint) continue;
    // Runs before the option's other validators (range checks) and its conversion.
    opt->transform(
        CLI::Validator([is_int](std::string& s) { return to_decimal(s, is_int); }, "", "decimal"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    require_decimal_integers(*sub);
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
