#include "report/json_text.hpp"

#include <charconv>

#include <nlohmann/json.hpp>

namespace agtrace::json_text {

void Writer::string(std::string_view s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) {
      // UTF-8 (or invalid bytes): nlohmann's own checks and escapes, as in the whole dump.
      put(nlohmann::ordered_json(std::string(s)).dump());
      return;
    }
  put('"');
  size_t plain = 0;  // start of the run of characters copied as they are
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    put(s.substr(plain, i - plain));
    plain = i + 1;
    switch (c) {
      case '"': put("\\\""); break;
      case '\\': put("\\\\"); break;
      case '\b': put("\\b"); break;
      case '\f': put("\\f"); break;
      case '\n': put("\\n"); break;
      case '\r': put("\\r"); break;
      case '\t': put("\\t"); break;
      default: {
        static const char kHex[] = "0123456789abcdef";  // nlohmann writes \u%04x
        const char escaped[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        put(std::string_view(escaped, sizeof escaped));
      }
    }
  }
  put(s.substr(plain));
  put('"');
}

void Writer::integer(int64_t v) {
  char buf[24];
  put(std::string_view(buf, static_cast<size_t>(std::to_chars(buf, buf + sizeof buf, v).ptr - buf)));
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

void Minifier::feed(std::string_view pretty, std::string& out) {
  out.reserve(out.size() + pretty.size());
  for (const char c : pretty) {
    if (in_string_) {
      if (escaped_) escaped_ = false;
      else if (c == '\\') escaped_ = true;
      else if (c == '"') in_string_ = false;
      out.push_back(c);
    } else if (c == '"') {
      in_string_ = true;
      out.push_back(c);
    } else if (c != ' ' && c != '\n') {
      out.push_back(c);
    }
  }
}

}  // namespace agtrace::json_text
