// JSON helpers the io readers and writers share: a strict parser (duplicate keys and deep nesting
// refused, for file headers and indexes), the kind of a value for error messages, and the text
// HuggingFace writes for its json files.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tlaloc::io {

// Parses `text`, refusing with a tlaloc::Error "<src>: <noun> ..." a key twice in one object
// ("has the key 'k' twice in one object"), nesting deeper than `max_depth` objects / arrays
// ("nests deeper than the format's N levels") and anything that is not JSON ("is not valid
// JSON: ...").
nlohmann::json parse_json_strict(std::string_view text, const std::string& src,
                                 std::string_view noun, int max_depth);

// The JSON object in file `path` (parse_json_strict; `noun` names it in errors). Throws naming
// the file when it is missing, not a regular file, over 256 MiB, unreadable or not an object.
nlohmann::json read_json_object(const std::string& path, std::string_view noun, int max_depth);

// "an object", "an array", "a string", "an integer", "a float", "a boolean", "null".
const char* json_kind(const nlohmann::json& j);

// The text HuggingFace writes for config.json, generation_config.json and
// model.safetensors.index.json: Python's json.dumps(value, indent=2, sort_keys=True) + "\n"
// (keys sorted, two-space indent, ", " / ": " separators, non-ASCII escaped as \uXXXX).
std::string hf_json_text(const nlohmann::json& value);

}  // namespace tlaloc::io
