#include "report/json_text.hpp"

#include <charconv>

#include <nlohmann/json.hpp>

namespace agtrace::json_text {

// The escapes, written through any sink with put(std::string_view) and put(char).
template <typename Sink>
void escape_into(Sink& out, std::string_view s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) {
      // UTF-8 (or invalid bytes): nlohmann's own checks and escapes, as in the whole dump.
      out.put(nlohmann::ordered_json(std::string(s)).dump());
      return;
    }
  out.put('"');
  size_t plain = 0;  // start of the run of characters copied as they are
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.put(s.substr(plain, i - plain));
    plain = i + 1;
    switch (c) {
      case '"': out.put("\\\""); break;
      case '\\': out.put("\\\\"); break;
      case '\b': out.put("\\b"); break;
      case '\f': out.put("\\f"); break;
      case '\n': out.put("\\n"); break;
      case '\r': out.put("\\r"); break;
      case '\t': out.put("\\t"); break;
      default: {
        static const char kHex[] = "0123456789abcdef";  // nlohmann writes \u%04x
        const char escaped[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out.put(std::string_view(escaped, sizeof escaped));
      }
    }
  }
  out.put(s.substr(plain));
  out.put('"');
}

namespace {
struct StringSink {
  std::string& out;
  void put(std::string_view s) { out.append(s); }
  void put(char c) { out += c; }
};
}  // namespace

void append_string(std::string& out, std::string_view s) {
  StringSink sink{out};
  escape_into(sink, s);
}

void Writer::string(std::string_view s) { escape_into(*this, s); }

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

void append_int(std::string& out, int64_t v) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  out.append(buf, end);
}

}  // namespace agtrace::json_text
