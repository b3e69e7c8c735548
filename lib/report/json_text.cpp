#include "report/json_text.hpp"

#include <charconv>

#include <nlohmann/json.hpp>

namespace agtrace::json_text {

void append_string(std::string& out, std::string_view s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) {
      // UTF-8 (or invalid bytes): nlohmann's own checks and escapes, as in the whole dump.
      out += nlohmann::ordered_json(std::string(s)).dump();
      return;
    }
  out += '"';
  size_t plain = 0;  // start of the run of characters copied as they are
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s, plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: {
        static const char kHex[] = "0123456789abcdef";  // nlohmann writes \u%04x
        const char escaped[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out.append(escaped, sizeof escaped);
      }
    }
  }
  out.append(s, plain, std::string_view::npos);
  out += '"';
}

Layout::Layout(std::string_view indent) {
  const std::string at(indent);
  first_field = "{\n" + at + "  \"";
  next_field = ",\n" + at + "  \"";
  close = "\n" + at + "}";
  first_item = "[\n" + at + "    ";
  first_entry = "{\n" + at + "    ";
  next_item = ",\n" + at + "    ";
  close_array = "\n" + at + "  ]";
  close_object = "\n" + at + "  }";
}

void append_int(std::string& out, int64_t v) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  out.append(buf, end);
}

}  // namespace agtrace::json_text
